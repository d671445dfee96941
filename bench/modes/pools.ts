import {
  DB_URL,
  DURATION,
  ROUNDS,
  USERS,
  byId,
  f0,
  f2,
  orders,
  recreateDatabase,
  script,
  seed,
  service,
  stopServer,
  table,
  wrk,
} from '../lib/common.js';

/** The mixed load at several pool sizes, to choose DATABASE_POOL_SIZE's default. */
export async function pools(): Promise<void> {
  const sizes = (process.env.BENCH_POOLS ?? '1,2,4,8').split(',').map(Number);
  const rows = [['pool', 'mixed req/s', 'p99 ms', 'GET req/s', 'orders req/s', 'server µs/req']];
  for (const size of sizes) {
    await recreateDatabase();
    const pg = await service(`service-pg-${size}`, 18083, { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(size) });
    await seed(pg.port);
    const mixed = await wrk(pg, script(`pool-mixed-${size}`, orders(10)), DURATION * ROUNDS);
    const get = await wrk(pg, script(`pool-get-${size}`, byId('/api/v1/users/', USERS)), DURATION);
    const post = await wrk(pg, script(`pool-post-${size}`, orders(1)), DURATION);
    rows.push([String(size), f0(mixed.rps), f2(mixed.p99), f0(get.rps), f0(post.rps), f0(mixed.serverUs)]);
    console.log((rows.at(-1) ?? []).join('  '));
    await stopServer(pg);
  }
  console.log(`\n${table(rows)}`);
}
