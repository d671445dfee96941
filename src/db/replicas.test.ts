// The replica lag estimate (replicas.ts): from the primary's positions over time, not from the
// last replayed commit, which ages without bound while the primary is idle.
import { describe, expect, it } from 'vitest';
import { parseLsn } from './replicas.js';

describe('parseLsn', () => {
  it('orders positions as PostgreSQL does', () => {
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) + 0xb374d848n);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
  });
});
