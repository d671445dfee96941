// The replica lag estimate (replicas.ts): from the primary's positions over time, not from the
// last replayed commit, which ages without bound while the primary is idle; and parseLsn, which
// orders WAL positions as PostgreSQL does. The checks against real clusters are in
// test/processes/read-replicas.test.ts.
import type { Kysely } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Database } from './database.js';
import type { PostgresPool } from './postgres-pool.js';
import { parseLsn, ReplicaSet } from './replicas.js';

describe('parseLsn', () => {
  it('orders positions as PostgreSQL does', () => {
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) + 0xb374d848n);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
  });
});

/** A set with no replicas whose primary reports `positions`, one a check. */
function setWithPrimaryAt(positions: bigint[], maxLagMs = 1000): ReplicaSet {
  const set = new ReplicaSet(
    [],
    undefined as unknown as Kysely<Database>,
    undefined as unknown as PostgresPool,
    maxLagMs,
  );
  set.currentPosition = () => Promise.resolve(positions.shift() ?? 0n);
  return set;
}

describe('the lag of a replica', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is the time since the primary moved past what the replica replayed, not since its last replayed commit', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const set = setWithPrimaryAt([100n, 200n, 200n, 300n]);
    await set.check(); // t = 0: the primary at 100
    vi.advanceTimersByTime(500);
    await set.check(); // t = 500: at 200
    vi.advanceTimersByTime(5000);
    await set.check(); // t = 5,500: still 200, the primary idle
    const now = performance.now();
    // Caught up with an idle primary: no lag, however old its last replayed commit.
    expect(set.lagOf(200n, now, 60_000)).toBe(0);
    // At 150: behind since the primary passed it, at the check that saw 200.
    expect(set.lagOf(150n, now)).toBe(5000);
    vi.advanceTimersByTime(1000);
    await set.check(); // t = 6,500: at 300
    expect(set.lagOf(200n, performance.now())).toBe(0);
    expect(set.lagOf(250n, performance.now())).toBe(0);
  });

  it('is the age of its last replayed commit when it is behind the first position the set saw', async () => {
    const set = setWithPrimaryAt([100n]);
    await set.check();
    expect(set.lagOf(50n, performance.now(), 1234)).toBe(1234);
  });
});
