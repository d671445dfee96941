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
//
// BENCH_SIDE_TRACING=<ratio> (instead of BENCH_BASELINE): this build with tracing on, sampling
// that share (parentbased_traceidratio) and exporting OTLP/HTTP protobuf to a sink in this process
// on the load core, beside the same build with tracing off: what tracing costs, measured so. With
// both set, the two builds each trace so: what a change to the tracing code costs or saves.
// OTEL_BSP_* set for the bench reach the tracing side(s): the batch processor's settings.
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
import { otlpSink } from './tracing.js';

export async function sideBySide(): Promise<void> {
  const sampled = process.env.BENCH_SIDE_TRACING;
  const ref = process.env.BENCH_BASELINE;
  const patch = process.env.BENCH_BASELINE_PATCH;
  const pgEnv = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  let start: (port: number) => Promise<Server>;
  let other: (port: number) => Promise<Server>;
  let names: [string, string];
  let close = () => {};
  // Tracing on, at `sampled`, exporting to a sink in this process on the load core.
  const tracedEnv = async () => {
    const sink = await otlpSink();
    close = sink.close;
    return {
      ...pgEnv,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: String(sampled),
      // The batch processor's settings of the bench's own environment, if any (OTEL_BSP_*).
      ...Object.fromEntries(
        Object.entries(process.env).filter(
          (e): e is [string, string] => e[0].startsWith('OTEL_BSP_') && e[1] !== undefined,
        ),
      ),
    };
  };
  const traced = sampled === undefined ? undefined : await tracedEnv();
  if (ref !== undefined) {
    // This build beside another; with BENCH_SIDE_TRACING too, both tracing so: what a change to
    // the tracing code costs or saves.
    const env = traced ?? pgEnv;
    const baseline = buildAt(ref, 'baseline', patch);
    start = (port) => service('side-current', port, env);
    other = (port) => startServer('side-baseline', port, ['--enable-source-maps', baseline], serviceEnv(port, env));
    names = ['this build', `${ref}${patch === undefined ? '' : ' + patch'}`];
    if (traced !== undefined) console.log(`both builds tracing, ${Number(sampled) * 100}% sampled`);
  } else if (traced !== undefined) {
    start = (port) => service('side-tracing-on', port, traced);
    other = (port) => service('side-tracing-off', port, pgEnv);
    names = [`tracing on, ${Number(sampled) * 100}% sampled`, 'tracing off'];
  } else {
    throw new Error(
      '--side-by-side needs BENCH_BASELINE=<git ref> (BENCH_BASELINE_PATCH optional) or BENCH_SIDE_TRACING=<ratio>, or both',
    );
  }
  const [aName, bName] = names;
  console.log(`seeding ${USERS} users and ${PRODUCTS} products…`);
  const seeder = await service('service-pg-seed', 18090, pgEnv);
  await seed(seeder.port);
  await stopServer(seeder);

  const half = Math.max(1, Math.floor(CONNECTIONS / 2));
  const cases = [
    { name: 'GET /api/v1/users/{id}', lua: script('side-get-by-id', byId('/api/v1/users/', USERS)) },
    { name: 'GET /api/products/{id} → 304', lua: script('side-not-modified', notModified(PRODUCTS)) },
  ];
  const ratios = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  const skipped: string[] = [];
  const rows: string[][] = [
    ['round', 'case', `${aName} µs/req`, 'p99 ms', 'failed', `${bName} µs/req`, 'p99 ms', 'failed', 'ratio (CPU)'],
  ];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      await vacuumAnalyze();
      // Which of the two starts first alternates, as does the port each gets.
      const [first, second] = round % 2 === 1 ? [18083, 18093] : [18093, 18083];
      const a = round % 2 === 1 ? await start(first) : await other(first);
      const b = round % 2 === 1 ? await other(second) : await start(second);
      const [mine, theirs] = round % 2 === 1 ? [a, b] : [b, a];
      try {
        for (const { name, lua } of cases) {
          let x: Measured;
          let y: Measured;
          try {
            await both(wrk(mine, lua, WARM_UP, half), wrk(theirs, lua, WARM_UP, half));
            [x, y] = await both(wrk(mine, lua, DURATION, half), wrk(theirs, lua, DURATION, half));
          } catch (error) {
            // A round whose load generator failed is reported and left out, not the end of a run
            // of many rounds. (A side that sheds is measured as it is: its 503s count against
            // it, its µs are per 2xx answer.)
            const why = error instanceof Error ? error.message.split('\n')[0] : String(error);
            skipped.push(`round ${round}, ${name}: ${why}`);
            console.log(`round ${round}/${ROUNDS}  ${name}: not measured (${why})`);
            continue;
          }
          const ratio = x.serverUs / y.serverUs;
          ratios.get(name)?.push(ratio);
          rows.push([
            String(round),
            name,
            f1(x.serverUs),
            f1(x.p99),
            f0(x.failed),
            f1(y.serverUs),
            f1(y.p99),
            f0(y.failed),
            ratio.toFixed(3),
          ]);
          console.log(
            `round ${round}/${ROUNDS}  ${name}: ${aName} ${f1(x.serverUs)} µs (${f0(x.rps)} req/s), ${bName} ${f1(y.serverUs)} µs (${f0(y.rps)} req/s): ${ratio.toFixed(3)}`,
          );
        }
      } finally {
        await stopServer(mine);
        await stopServer(theirs);
      }
    }
  } finally {
    close();
  }
  console.log(
    `\nside by side: both servers on the server core at once, each with wrk -c${half} on the load core; ${postgresPlace}; ${DURATION} s × ${ROUNDS} rounds, a new pair of processes each round; pool ${POOL}; Node ${process.version}\n`,
  );
  console.log(table(rows));
  if (skipped.length > 0)
    console.log(`not measured (the load generator failed), left out of the medians:\n  ${skipped.join('\n  ')}`);
  for (const [name, values] of ratios) {
    if (values.length === 0) {
      console.log(`${name}: no round measured`);
      continue;
    }
    console.log(
      `${name}: ${aName}: CPU per request ${percentile(values, 50).toFixed(3)}× of ${bName}'s (median of ${values.length}; range ${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)})`,
    );
  }
}

type Measured = Awaited<ReturnType<typeof wrk>>;

/** Both loads' results; when one fails, the other is waited for first (no load left running). */
async function both(a: Promise<Measured>, b: Promise<Measured>): Promise<[Measured, Measured]> {
  const [x, y] = await Promise.allSettled([a, b]);
  if (x.status === 'rejected') throw x.reason;
  if (y.status === 'rejected') throw y.reason;
  return [x.value, y.value];
}
