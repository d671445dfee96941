import { describe, expect, it } from 'vitest';
import { acceptedVersions, negotiate } from './versioning.js';

const V = 'resource-api';
const vnd = (n: number) => `application/vnd.${V}.v${n}+json`;

describe('acceptedVersions', () => {
  it('lists vendor versions by preference, ignoring q=0 and other types', () => {
    expect(acceptedVersions(undefined, V)).toEqual([]);
    expect(acceptedVersions('application/json', V)).toEqual([]);
    expect(acceptedVersions(`${vnd(1)};q=0.5, ${vnd(2)}`, V)).toEqual([2, 1]);
    expect(acceptedVersions(`${vnd(2)};q=0, ${vnd(1)}`, V)).toEqual([1]);
    expect(acceptedVersions('application/vnd.other.v2+json', V)).toEqual([]);
    expect(acceptedVersions('APPLICATION/VND.RESOURCE-API.V2+JSON', V)).toEqual([2]);
  });
});

describe('negotiate', () => {
  it('leaves paths of unversioned resources alone', () => {
    expect(negotiate('/api/products/1', {}, V)).toBeUndefined();
    expect(negotiate('/api/public/health/live', { 'x-api-version': '9' }, V)).toBeUndefined();
    expect(negotiate('/api/usersx', {}, V)).toBeUndefined();
  });

  it.each([
    // url, X-API-Version, Accept → routed url, version, media type, error status
    ['/api/users', undefined, undefined, '/api/v1/users', 1, undefined, undefined],
    ['/api/users/5?x=1', '2', undefined, '/api/v2/users/5?x=1', 2, undefined, undefined],
    ['/api/orders', undefined, vnd(2), '/api/v2/orders', 2, vnd(2), undefined],
    ['/api/orders', '1', vnd(1), '/api/v1/orders', 1, vnd(1), undefined],
    ['/api/users', '2', vnd(1), '/api/v2/users', 2, undefined, 406],
    ['/api/users', '3', undefined, '/api/v1/users', 1, undefined, 400],
    ['/api/users', 'two', undefined, '/api/v1/users', 1, undefined, 400],
    ['/api/users', undefined, vnd(3), '/api/v1/users', 1, undefined, 406],
    ['/api/users', undefined, `${vnd(3)}, ${vnd(2)};q=0.5`, '/api/v2/users', 2, vnd(2), undefined],
    ['/api/users', undefined, 'application/json', '/api/v1/users', 1, undefined, undefined],
    ['/api/v1/users', undefined, undefined, '/api/v1/users', 1, undefined, undefined],
    ['/api/v2/users/3', '2', vnd(2), '/api/v2/users/3', 2, vnd(2), undefined],
    ['/api/v1/users', '2', undefined, '/api/v1/users', 1, undefined, 400],
    ['/api/v1/orders', undefined, vnd(2), '/api/v1/orders', 1, undefined, 406],
    ['/api/v2/orders', '9', undefined, '/api/v2/orders', 2, undefined, 400],
  ] as const)(
    '%s with X-API-Version %s and Accept %s → %s',
    (url, header, accept, routed, version, mediaType, status) => {
      const n = negotiate(url, { ...(header ? { 'x-api-version': header } : {}), ...(accept ? { accept } : {}) }, V)!;

      expect(n.url).toBe(routed);
      expect(n.version).toBe(version);
      expect(n.mediaType).toBe(mediaType);
      expect(n.error?.status).toBe(status);
      expect(n.unversioned).toBe(!/\/v\d+\//.test(url));
    },
  );
});
