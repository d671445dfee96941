// npm run bench -- --crowds: crowds of clients that keep their connections busy (a closed loop,
// no think time, Retry-After ignored), against two instances of this build on one database, one
// with OVERLOAD_PROTECTION=false, measured in alternating rounds (the idle one waits). A crowd is
// not overload: where the unprotected instance answers it within the latency budget, the
// protected one must answer as much and refuse nothing; where the unprotected one is past the
// clients' time-out, the protected one must answer at least as much in time. Then a change of
// mix (GET by id, then the list page at once, on one instance) and what it refuses.
//
// For each request (GET by id, the list page, orders on one product) and crowd (BENCH_CROWDS,
// default 64,256,1000 clients): 2xx/s, goodput (2xx within 500 ms)/s, the share refused, p50 and
// p99 of the answers that were not refused, time-outs (2 s), the service's CPU µs per answer, and
// its admission's gauges over the round (read every 200 ms): the most that waited for a place, and
// the limit's median and least (whether a side's figures owe anything to admission at all); and
// the load core's busy share with PostgreSQL's CPU in cores (the clients share its core: a side
// whose clients send more, refused ones again at once, leaves it less).
// Every round counts: none is left out for what the service answered.
import {
  DB_URL,
  LOAD_CORE,
  DURATION,
  ONLY,
  POOL,
  ROUNDS,
  TICK_US,
  TOKEN,
  USERS,
  coreTicks,
  cpuTicks,
  f0,
  f1,
  f2,
  postgresDelta,
  postgresTicks,
  seed,
  service,
  stopServer,
  table,
  vacuumAnalyze,
  type Server,
} from '../lib/common.js';
import { closedLoop, type ClosedLoopResult } from '../lib/closed-loop.js';
import { percentile, type Planned } from '../lib/open-loop.js';
import { instrumentFirst, sampleAdmission, type AdmissionSamples } from './overload.js';

const CROWDS = (process.env.BENCH_CROWDS ?? '64,256,1000').split(',').map(Number);
/** Seconds each side serves a request before its first measured round (BENCH_CROWDS_WARM_UP). */
const WARM_UP_S = Number(process.env.BENCH_CROWDS_WARM_UP ?? 15);
const BUDGET_MS = 250;
const TIMEOUT_MS = 2000;

interface Request {
  name: string;
  plan: (i: number) => Planned;
}

const requests: Request[] = [
  { name: 'GET /api/v1/users/{id}', plan: (i) => ({ method: 'GET', path: `/api/v1/users/${(i % USERS) + 1}` }) },
  {
    name: 'GET /api/v1/users?page=…&size=20',
    plan: (i) => ({ method: 'GET', path: `/api/v1/users?page=${(i % (USERS / 20)) + 1}&size=20` }),
  },
  {
    name: 'POST /api/v1/orders (one product)',
    plan: () => ({ method: 'POST', path: '/api/v1/orders', body: '{"productId":1,"quantity":1}' }),
  },
];

interface Run {
  result: ClosedLoopResult;
  cpuUs: number;
  /** The service's own count of what it shed, by reason, over the run. */
  shed: Record<string, number>;
  /** Its admission's gauges over the run (whether anything waited for a place, and the limit). */
  admission: AdmissionSamples;
  /** The load core's busy share over the run (the clients, the probe, PostgreSQL). */
  loadCore: number;
  /** PostgreSQL's CPU over the run, in cores (what the clients on its core left it). */
  postgresCores: number;
}

/** http_requests_shed_total by reason, from the service's metrics port. */
async function shedCounts(server: Server): Promise<Record<string, number>> {
  const text = await fetch(`http://127.0.0.1:${server.port + 1000}/metrics`).then((r) => r.text());
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^http_requests_shed_total\{reason="(\w+)"\} (\S+)$/gm))
    counts[m[1] as string] = Number(m[2]);
  return counts;
}

async function run(server: Server, request: Request, clients: number, seconds = DURATION): Promise<Run> {
  const shedBefore = await shedCounts(server);
  const before = cpuTicks(server.pid);
  const loadBefore = coreTicks(LOAD_CORE);
  const postgresBefore = postgresTicks();
  const started = performance.now();
  const sampler = sampleAdmission(server);
  const result = await closedLoop({
    port: server.port,
    clients,
    seconds,
    plan: request.plan,
    headers: { authorization: `Bearer ${TOKEN}` },
    timeoutMs: TIMEOUT_MS,
  });
  const cpuUs = ((cpuTicks(server.pid) - before) * TICK_US) / Math.max(1, result.answered);
  // (Read before the sampler's last wait, which would add idle time to both.)
  const loadAfter = coreTicks(LOAD_CORE);
  const loadCore = (loadAfter.busy - loadBefore.busy) / Math.max(1, loadAfter.total - loadBefore.total);
  const postgresUs = [...postgresDelta(postgresBefore, postgresTicks()).values()].reduce((a, b) => a + b, 0) * TICK_US;
  const postgresCores = postgresUs / ((performance.now() - started) * 1000);
  const admission = await sampler.stop();
  const shedAfter = await shedCounts(server);
  const shed = Object.fromEntries(Object.entries(shedAfter).map(([k, v]) => [k, v - (shedBefore[k] ?? 0)]));
  return { result, cpuUs, shed, admission, loadCore, postgresCores };
}

/** The shed counts that are not zero, as `limit:12 queue:3`. */
const shedText = (shed: Record<string, number>) =>
  Object.entries(shed)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k}:${f0(n)}`)
    .join(' ') || '-';

const ok = (r: ClosedLoopResult) =>
  [...r.statuses].filter(([s]) => s >= 200 && s < 300).reduce((n, [, count]) => n + count, 0);
const refusedShare = (r: ClosedLoopResult) => (r.statuses.get(503) ?? 0) / Math.max(1, r.answered + r.timeouts);
const median = (values: number[]) => percentile(values, 50);

export async function crowds(): Promise<void> {
  const priority = instrumentFirst();
  const env = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  const seeder = await service('service-crowds-seed', 18110, env);
  console.log(`seeding ${USERS} users and the products…`);
  await seed(seeder.port);
  await stopServer(seeder);

  const guarded = await service('service-crowds-protected', 18111, env);
  const open = await service('service-crowds-off', 18112, { ...env, OVERLOAD_PROTECTION: 'false' });
  const sides = [
    { label: 'protected', server: guarded },
    { label: 'off', server: open },
  ] as const;
  const rows = [
    [
      'request',
      'clients',
      'side',
      '2xx/s',
      'good/s',
      'refused',
      'shed by',
      'queued max',
      'limit p50 / min',
      'p50 ms',
      'p99 ms',
      'time-outs',
      'µs CPU/answer',
      'load core',
      'PostgreSQL cores',
    ],
  ];
  // One measured round: a row of the table, printed as it comes.
  const report = (name: string, clients: number, side: string, run: Run): void => {
    const { result: r, shed, cpuUs, admission: a } = run;
    const line = [
      name,
      String(clients),
      side,
      f0(ok(r) / r.seconds),
      f0(r.good / r.seconds),
      `${f2(100 * refusedShare(r))}%`,
      shedText(shed),
      // (No sample read in time, in the busiest rounds: '-', not a 0 that would say nothing waited.)
      a.queued.length === 0 ? '-' : f0(Math.max(...a.queued.filter(Number.isFinite))),
      a.limit.length === 0
        ? '-'
        : `${f0(percentile(a.limit.filter(Number.isFinite), 50))} / ${f0(Math.min(...a.limit.filter(Number.isFinite)))}`,
      f1(percentile(r.admitted, 50)),
      f1(percentile(r.admitted, 99)),
      f0(r.timeouts),
      f1(cpuUs),
      f2(run.loadCore),
      f2(run.postgresCores),
    ];
    rows.push(line);
    console.log(line.join('  '));
  };
  const verdicts: string[] = [];
  for (const request of requests.filter((r) => ONLY === undefined || ONLY.test(r.name))) {
    // Each side's first seconds on a request run cold (its first orders ran at half the rate over
    // a whole 8-s round, whichever side went first: docs/benchmark-log.md), so both sides serve
    // it for WARM_UP_S before its first measured round, and 2 s before each round after.
    if (WARM_UP_S > 0) for (const side of sides) await run(side.server, request, CROWDS[0] ?? 64, WARM_UP_S);
    for (const clients of CROWDS) {
      const runs: Record<'protected' | 'off', Run[]> = { protected: [], off: [] };
      for (let round = 0; round < ROUNDS; round++) {
        await vacuumAnalyze();
        // Alternating which side goes first, so that a trend of the host falls on both.
        for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
          await run(side.server, request, clients, 2); // warm-up
          const measured = await run(side.server, request, clients);
          runs[side.label].push(measured);
          report(request.name, clients, `${side.label} ${round + 1}`, measured);
        }
      }
      const m = (side: 'protected' | 'off', f: (r: ClosedLoopResult) => number) =>
        median(runs[side].map((x) => f(x.result)));
      const offP99 = m('off', (r) => percentile(r.admitted, 99));
      const offTimedOut = m('off', (r) => r.timeouts / Math.max(1, r.answered + r.timeouts));
      const name = `${request.name}, ${clients} clients`;
      if (offP99 <= BUDGET_MS) {
        const ratio = m('protected', (r) => ok(r) / r.seconds) / m('off', (r) => ok(r) / r.seconds);
        const refused = Math.max(...runs.protected.map((x) => refusedShare(x.result)));
        verdicts.push(
          `${name}: unprotected p99 ${f0(offP99)} ms (within ${BUDGET_MS}): 2xx/s ${f2(ratio)}× of off (≥ 0.95), refused ${f2(100 * refused)}% (≤ 0.1%): ${ratio >= 0.95 && refused <= 0.001 ? 'met' : 'NOT met'}`,
        );
      } else if (offP99 >= TIMEOUT_MS || offTimedOut > 0.01) {
        const good = m('protected', (r) => r.good / r.seconds);
        const offGood = m('off', (r) => r.good / r.seconds);
        verdicts.push(
          `${name}: unprotected past the ${TIMEOUT_MS}-ms time-out (p99 ${f0(offP99)} ms, ${f2(100 * offTimedOut)}% timed out): goodput ${f0(good)}/s against ${f0(offGood)}/s off (≥): ${good >= offGood ? 'met' : 'NOT met'}`,
        );
      } else
        verdicts.push(
          `${name}: unprotected p99 ${f0(offP99)} ms, past the budget and within the time-out: no line (goodput ${f0(m('protected', (r) => r.good / r.seconds))}/s against ${f0(m('off', (r) => r.good / r.seconds))}/s off)`,
        );
    }
  }

  // A change of mix at the same crowd: GET by id, then the list page at once, on each instance.
  const [byId, list] = requests as [Request, Request];
  for (let round = 0; round < ROUNDS; round++) {
    await vacuumAnalyze();
    // Alternating which side goes first, as above: the protected side went first in every round
    // (right after the orders' rounds), and read 0.62–0.73× of the other with nothing refused.
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      await run(side.server, byId, 64, 10);
      const after = await run(side.server, list, 64);
      const r = after.result;
      report('list page right after 10 s of GET by id', 64, `${side.label} ${round + 1}`, after);
      if (side.label === 'protected')
        verdicts.push(
          `change of mix, round ${round + 1}: ${f2(100 * refusedShare(r))}% of the list page refused (≤ 0.1%): ${refusedShare(r) <= 0.001 ? 'met' : 'NOT met'}`,
        );
    }
  }
  await stopServer(guarded);
  await stopServer(open);

  console.log(`
closed loop, no think time, Retry-After ignored; ${DURATION} s a round after 2 s of warm-up (${WARM_UP_S} s before a request's first round), ${ROUNDS} rounds, the sides alternating; 2-s client time-out; good = 2xx within 500 ms; pool ${POOL}
${priority}

${table(rows)}
`);
  for (const v of verdicts) console.log(v);
}
