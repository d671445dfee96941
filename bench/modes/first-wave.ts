import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CONNECTIONS,
  DB_URL,
  POOL,
  PRODUCTS,
  ROUNDS,
  USERS,
  byId,
  f0,
  f2,
  orders,
  script,
  seed,
  service,
  stopServer,
  table,
  vacuumAnalyze,
  work,
  wrk,
} from '../lib/common.js';

/**
 * A new instance's first orders: a fresh process, 3 s of reads, then orders from 64 connections.
 * The p99 of their first second against the next two seconds' shows what a new instance's first
 * wave pays for connections that have never run the order statement (src/db/prepared.ts,
 * warmUp, docs/benchmark-log.md). Each round is a new process on the same seeded database.
 */
export async function firstWave(): Promise<void> {
  const env = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  const seeder = await service('service-pg-seed', 18090, env);
  console.log(`seeding ${USERS} users and ${PRODUCTS} products, and 10 s of orders…`);
  await seed(seeder.port);
  const lua = script('first-wave-orders', orders(1));
  await wrk(seeder, lua, 10);
  await stopServer(seeder);
  const rows = [['round', 'warm-up ms', 'first 1 s: orders/s', 'p99 ms', 'next 2 s: orders/s', 'p99 ms', 'ratio']];
  const ratios: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    await vacuumAnalyze();
    const server = await service('service-pg-first-wave', 18083, env);
    const ready = readFileSync(join(work, 'service-pg-first-wave.log'), 'utf8')
      .split('\n')
      .find((line) => line.includes('resource-api ready'));
    const warmUpMs = ready === undefined ? NaN : Number((JSON.parse(ready) as { warmUpMs?: number }).warmUpMs);
    await wrk(server, script('first-wave-reads', byId('/api/v1/users/', USERS)), 3);
    const first = await wrk(server, lua, 1);
    const next = await wrk(server, lua, 2);
    await stopServer(server);
    ratios.push(first.p99 / next.p99);
    rows.push([
      String(round),
      f0(warmUpMs),
      f0(first.rps),
      f2(first.p99),
      f0(next.rps),
      f2(next.p99),
      `${f2(first.p99 / next.p99)}×`,
    ]);
    console.log((rows.at(-1) ?? []).join('  '));
  }
  const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)] ?? NaN;
  console.log(`
pool ${POOL}, ${CONNECTIONS} connections, Node ${process.version}

${table(rows)}
`);
  console.log(
    `first second's p99 / the next two seconds', median: ${f2(median)}× (≤ 2×): ${median <= 2 ? 'met' : 'NOT met'}`,
  );
}
