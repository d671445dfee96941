// npm run bench -- --side-by-side: this build beside another (BENCH_BASELINE=<git ref>, with
// BENCH_BASELINE_PATCH applied if given), both running at the same moment on the server core.
//
// On a host whose speed swings by a fifth within minutes, two builds measured one after the
// other differ by the host as much as by their code: interleaved rounds of the ratio table read
// the same build 0.85× and 1.15× of itself (docs/benchmark-log.md). Two processes sharing one
// core at the same moment see the same host: each gets its own wrk (half of BENCH_CONNECTIONS)
// on the load core, and the figure is the ratio of their CPU per request (from /proc), round by
// round, with a new pair of processes each round so that a process's own draw (its heap, its
// code's placement) falls on both sides too. Throughput is not the figure: the two share the
// core, and whichever is cheaper serves more.
import {
  CONNECTIONS,
  DB_URL,
  DURATION,
  POOL,
  ROUNDS,
  type Server,
  WARM_UP,
  buildAt,
  byId,
  f0,
  f1,
  notModified,
  postgresPlace,
  script,
  seed,
  service,
  serviceEnv,
  startServer,
  stopServer,
  table,
  vacuumAnalyze,
  wrk,
  PRODUCTS,
  USERS,
} from '../lib/common.js';
import { percentile } from '../lib/open-loop.js';

export async function sideBySide(): Promise<void> {
  const ref = process.env.BENCH_BASELINE;
  if (ref === undefined)
    throw new Error('--side-by-side needs BENCH_BASELINE=<git ref> (BENCH_BASELINE_PATCH optional)');
  const patch = process.env.BENCH_BASELINE_PATCH;
  const baseline = buildAt(ref, 'baseline', patch);
  const pgEnv = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  console.log(`seeding ${USERS} users and ${PRODUCTS} products…`);
  const seeder = await service('service-pg-seed', 18090, pgEnv);
  await seed(seeder.port);
  await stopServer(seeder);

  const half = Math.max(1, Math.floor(CONNECTIONS / 2));
  const cases = [
    { name: 'GET /api/v1/users/{id}', lua: script('side-get-by-id', byId('/api/v1/users/', USERS)) },
    { name: 'GET /api/products/{id} → 304', lua: script('side-not-modified', notModified(PRODUCTS)) },
  ];
  const baselineName = `${ref}${patch === undefined ? '' : ' + patch'}`;
  const ratios = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  const rows: string[][] = [
    ['round', 'case', 'this build µs/req', 'p99 ms', `${baselineName} µs/req`, 'p99 ms', 'this / baseline (CPU)'],
  ];
  for (let round = 1; round <= ROUNDS; round++) {
    await vacuumAnalyze();
    // Which of the two starts first alternates, as does the port each gets.
    const [first, second] = round % 2 === 1 ? [18083, 18093] : [18093, 18083];
    const current = await service('side-current', first, pgEnv);
    const other: Server = await startServer(
      'side-baseline',
      second,
      ['--enable-source-maps', baseline],
      serviceEnv(second, pgEnv),
    );
    try {
      for (const { name, lua } of cases) {
        await Promise.all([wrk(current, lua, WARM_UP, half), wrk(other, lua, WARM_UP, half)]);
        const [a, b] = await Promise.all([wrk(current, lua, DURATION, half), wrk(other, lua, DURATION, half)]);
        const ratio = a.serverUs / b.serverUs;
        ratios.get(name)?.push(ratio);
        rows.push([String(round), name, f1(a.serverUs), f1(a.p99), f1(b.serverUs), f1(b.p99), ratio.toFixed(3)]);
        console.log(
          `round ${round}/${ROUNDS}  ${name}: this build ${f1(a.serverUs)} µs (${f0(a.rps)} req/s), ${baselineName} ${f1(b.serverUs)} µs (${f0(b.rps)} req/s): ${ratio.toFixed(3)}`,
        );
      }
    } finally {
      await stopServer(current);
      await stopServer(other);
    }
  }
  console.log(
    `\nside by side: both servers on the server core at once, each with wrk -c${half} on the load core; ${postgresPlace}; ${DURATION} s × ${ROUNDS} rounds, a new pair of processes each round; pool ${POOL}; Node ${process.version}\n`,
  );
  console.log(table(rows));
  for (const [name, values] of ratios) {
    console.log(
      `${name}: this build's CPU per request ${percentile(values, 50).toFixed(3)}× of ${baselineName}'s (median of ${values.length}; range ${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)})`,
    );
  }
}
