import { describe, expect, it } from 'vitest';
import { etagFor, ifMatchVersions, noneMatchHits } from './etag.js';

describe('noneMatchHits (weak comparison)', () => {
  it.each([
    ['"3"', true],
    ['W/"3"', true],
    ['"2", "3"', true],
    ['"1",W/"3"', true],
    ['*', true],
    ['"2"', false],
    ['"33"', false],
    ['3', false],
    ['', false],
  ])('If-None-Match: %s → %s', (header, hit) => {
    expect(noneMatchHits(header, etagFor(3))).toBe(hit);
  });

  it('is false without the header', () => {
    expect(noneMatchHits(undefined, '"3"')).toBe(false);
  });
});

describe('ifMatchVersions (strong comparison)', () => {
  it('parses tags, lists and *', () => {
    expect(ifMatchVersions(undefined)).toBeUndefined();
    expect(ifMatchVersions('"4"')).toEqual([4]);
    expect(ifMatchVersions('"4", "5"')).toEqual([4, 5]);
    expect(ifMatchVersions('*')).toBe('*');
    expect(ifMatchVersions('W/"4"')).toEqual([]);
    expect(ifMatchVersions('garbage')).toEqual([]);
  });
});
