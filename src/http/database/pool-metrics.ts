// The database pools' metrics (docs/operations.md, "Metrics"), on the app's registry: the
// primary's pool, and with DATABASE_REPLICA_URLS the replicas' pools, summed, as `pool="replica"`.
// Every series carries `pool`, so that a rule written for one topology reads the same in another.
// (The pool on DATABASE_DIRECT_URL lives only while migrations run, before the app is built.)
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge } from 'prom-client';
import { poolOf } from '../../db/create-database.js';
import type { PoolMetrics, PostgresPool } from '../../db/postgres-pool.js';
import type { ReplicaSet } from '../../db/replicas.js';

type PoolName = 'primary' | 'replica';

async function poolMetrics(app: FastifyInstance, { replicas }: { replicas?: ReplicaSet | undefined }): Promise<void> {
  const primary = poolOf(app.db);
  if (primary === undefined) return; // the embedded engine: no pool
  const pools: [PoolName, PostgresPool[]][] = [['primary', [primary]]];
  if (replicas !== undefined) pools.push(['replica', replicas.replicas.map((replica) => replica.pool)]);
  const read = (of: PostgresPool[], key: keyof PoolMetrics) => of.reduce((sum, pool) => sum + pool.metrics()[key], 0);

  const gauge = (name: string, help: string, key: keyof PoolMetrics) =>
    new Gauge({
      name,
      help,
      labelNames: ['pool'],
      registers: [app.metrics],
      collect() {
        for (const [pool, of] of pools) this.set({ pool }, read(of, key));
      },
    });
  const counter = (name: string, help: string, key: keyof PoolMetrics) => {
    const counted = new Map<PoolName, number>();
    return new Counter({
      name,
      help,
      labelNames: ['pool'],
      registers: [app.metrics],
      collect() {
        for (const [pool, of] of pools) {
          const now = read(of, key);
          this.inc({ pool }, Math.max(0, now - (counted.get(pool) ?? 0)));
          counted.set(pool, now);
        }
      },
    });
  };
  gauge('db_pool_connections', 'Database connections open', 'open');
  gauge('db_pool_statements_waiting', 'Statements and transactions waiting for a database connection', 'waiting');
  counter(
    'db_pool_queue_timeouts_total',
    'Statements refused after waiting longer than DATABASE_QUEUE_TIMEOUT_MS (for a connection, or a gathered read for its statement)',
    'queueTimeouts',
  );
  counter(
    'db_pool_connection_errors_total',
    'Database connections lost, and sessions that failed to open',
    'connectionErrors',
  );
}

export default fp(poolMetrics, { name: 'pool-metrics', dependencies: ['metrics'] });
