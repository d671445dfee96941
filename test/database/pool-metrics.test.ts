// The pool's metrics (docs/operations.md, "Metrics"), as Prometheus scrapes them from the metrics
// port: connections open, statements waiting for one, statements refused for their wait, and
// connections lost. The app's pool runs through a relay of the test's own, to lose connections.
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { poolOf } from '../../src/db/create-database.js';
import { startMetricsServer } from '../../src/http/metrics.js';
import { pausableRelay, type PausableRelay } from '../support/pausable-relay.js';
import { buildTestApp, engine } from '../support/test-app.js';
import { until } from '../support/until.js';

describe.runIf(engine === 'postgres')('the pool on the metrics port', async () => {
  if (engine !== 'postgres') return;
  let relay!: PausableRelay;
  const { app } = await buildTestApp(
    { DATABASE_POOL_SIZE: '2', DATABASE_QUEUE_TIMEOUT_MS: '1000' },
    {
      front: async (url) => {
        relay = await pausableRelay(url);
        return relay.url;
      },
    },
  );
  const server = await startMetricsServer(app.metrics, 0, '127.0.0.1');
  afterAll(async () => {
    server.close();
    await relay.close();
  });
  /** One sample of the scrape, `name{pool="primary"}`; NaN when it is not there. */
  const sample = async (name: string): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{pool="primary"} `));
    return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
  };

  it('says how many connections are open and how many statements wait, and counts queue time-outs and lost connections', async () => {
    await sql`select 1`.execute(app.db); // behind a pooler the connections open on first demand
    await until('both connections open', async () => (await sample('db_pool_connections')) === 2);
    const pool = poolOf(app.db)!;
    const timeoutsBefore = await sample('db_pool_queue_timeouts_total');
    const errorsBefore = await sample('db_pool_connection_errors_total');

    // A scrape also waits a moment for the webhook metrics' own statement (webhooks/delivery/
    // metrics.ts), which waits for a connection too: the pool's gauges are read first, when the
    // scrape begins, while the connections are held.
    let held = [await pool.reserve(), await pool.reserve()];
    const answered = sql`select 1`.execute(app.db);
    const scraped = sample('db_pool_statements_waiting');
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (const reservation of held) reservation.release();
    expect(await scraped).toBe(1);
    await answered;
    expect(await sample('db_pool_statements_waiting')).toBe(0);

    held = [await pool.reserve(), await pool.reserve()];
    const refused = await sql`select 1`.execute(app.db).then(
      () => 'answered',
      () => 'refused',
    );
    for (const reservation of held) reservation.release();
    expect(refused).toBe('refused');
    expect(await sample('db_pool_queue_timeouts_total')).toBe(timeoutsBefore + 1);

    relay.drop();
    await until(
      'both connections lost',
      async () => (await sample('db_pool_connection_errors_total')) >= errorsBefore + 2,
    );
    await until('both connections open again', async () => {
      await sql`select 1`.execute(app.db).catch(() => {});
      return (await sample('db_pool_connections')) === 2;
    });
  });
});
