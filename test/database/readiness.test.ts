// Readiness under load (docs/operations.md#running-several-instances): a probe is answered from the pool's own evidence when the
// database answered one of the service's statements within the last second and no connection
// was lost since; otherwise it asks for `select 1` with a 2-s deadline. One connection, kept
// busy by a slow statement, shows both: the probe that trusts a fresh answer is 200 at once,
// the one that must ask waits behind the slow statement and gets its 503.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { buildTestApp, engine } from '../support/test-app.js';

describe.runIf(engine === 'postgres')('readiness while the pool is busy', async () => {
  if (engine !== 'postgres') return;
  const { app } = await buildTestApp({ DATABASE_POOL_SIZE: '1', DATABASE_STATEMENT_TIMEOUT_MS: '10000' });
  const ready = async () => {
    const started = performance.now();
    const response = await app.inject({ method: 'GET', url: '/api/public/health/ready' });
    return { status: response.statusCode, ms: performance.now() - started, body: response.body };
  };

  it('is 200 at once when the database answered within the last second', async () => {
    await sql`select 1`.execute(app.db); // an answer, just now
    const slow = sql`select pg_sleep(2)`.execute(app.db);
    const probe = await ready();
    expect(probe.status, probe.body).toBe(200);
    expect(probe.ms).toBeLessThan(1500); // the statement in flight takes 2 s: the probe did not wait for it
    await slow;
  });

  it('asks the database otherwise, and is 503 when it does not answer within 2 s', async () => {
    const slow = sql`select pg_sleep(4)`.execute(app.db);
    await new Promise((r) => setTimeout(r, 1100)); // the last answer is now more than a second old
    const probe = await ready();
    expect(probe.status, probe.body).toBe(503);
    expect(probe.ms).toBeGreaterThan(1900);
    await slow;
    expect((await ready()).status).toBe(200);
  });

  it('exports what it last answered and how often that changed (health_ready, health_ready_changes_total)', async () => {
    const scrape = async () => {
      const text = await app.metrics.metrics();
      return {
        ready: Number(/^health_ready (\S+)$/m.exec(text)?.[1]),
        changes: Number(/^health_ready_changes_total (\S+)$/m.exec(text)?.[1]),
      };
    };
    expect((await ready()).status).toBe(200);
    const before = await scrape();

    const slow = sql`select pg_sleep(4)`.execute(app.db);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await ready()).status).toBe(503);
    const down = await scrape();
    await slow;
    expect((await ready()).status).toBe(200);
    expect((await ready()).status).toBe(200);
    const after = await scrape();

    expect(before.ready).toBe(1);
    expect(down).toEqual({ ready: 0, changes: before.changes + 1 });
    expect(after).toEqual({ ready: 1, changes: before.changes + 2 });
  });
});
