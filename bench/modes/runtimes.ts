import { execFileSync } from 'node:child_process';
import {
  DB_URL,
  DURATION,
  type Measurement,
  POOL,
  PRODUCTS,
  officialNode,
  ROUNDS,
  type Server,
  USERS,
  WARM_UP,
  byId,
  f0,
  f1,
  f2,
  notModified,
  orders,
  script,
  seed,
  service,
  serviceEnv,
  startServer,
  stopServer,
  table,
  vacuumAnalyze,
  wrk,
} from '../lib/common.js';
import { otlpSink } from './tracing.js';

/** The lines compared (BENCH_RUNTIMES, comma-separated majors or exact versions): 20, 24 and 26 by default. */
const LINES = (process.env.BENCH_RUNTIMES ?? '20,24,26').split(',').map((v) => v.trim());

/** A line's official binary (officialNode(): the image's own line at the Dockerfile's release). */
function nodeBinary(line: string): { version: string; node: string } {
  const node = officialNode(line);
  return { version: execFileSync(node, ['--version'], { encoding: 'utf8' }).trim(), node };
}

interface Runtime {
  line: string;
  version: string;
  node: string;
}

interface Kind {
  name: string;
  lua: string;
  /** Tracing on: 10% of traces sampled, exported to the sink. */
  traced?: boolean;
}

/**
 * `npm run bench -- --runtimes`: the service on each Node.js line of BENCH_RUNTIMES (the official
 * binaries), in interleaved rounds (each round starts with another line): GET by id, the 304 read
 * and POST /api/v1/orders, and GET by id with tracing on at 10% sampled (OTLP/HTTP to a sink on the
 * load core) beside the same with it off. A new process per line and round (a process is a draw
 * here), each case warmed up with its own load first; medians of the rounds, and each line against
 * the first one (req/s and CPU per request). For docs/benchmark.md, "Runtimes".
 */
export async function runtimes(): Promise<void> {
  const sink = await otlpSink();
  try {
    const lines: Runtime[] = LINES.map((line) => ({ line, ...nodeBinary(line) }));
    console.log(`runtimes: ${lines.map((r) => `${r.line} → ${r.version}`).join(', ')}`);
    const base = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
    const seeder = await service('service-pg-seed', 18090, base);
    await seed(seeder.port);
    await stopServer(seeder);

    const start = (runtime: Runtime, traced: boolean, port: number): Promise<Server> =>
      startServer(
        `service-node${runtime.line}${traced ? '-traced' : ''}`,
        port,
        ['--enable-source-maps', 'dist/src/server.js'],
        serviceEnv(port, {
          ...base,
          ...(traced
            ? {
                OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
                OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
                OTEL_TRACES_SAMPLER_ARG: '0.1',
              }
            : {}),
        }),
        undefined,
        runtime.node,
      );
    const byIdLua = script('runtimes-by-id', byId('/api/v1/users/', USERS));
    const kinds: Kind[] = [
      { name: 'GET /api/v1/users/{id}', lua: byIdLua },
      { name: 'GET /api/products/{id} → 304', lua: script('runtimes-304', notModified(PRODUCTS)) },
      { name: 'POST /api/v1/orders', lua: script('runtimes-orders', orders(1)) },
      { name: 'GET /api/v1/users/{id}, tracing on, 10% sampled', lua: byIdLua, traced: true },
    ];
    const results = new Map<string, Measurement[]>();
    const key = (runtime: Runtime, kind: Kind) => `${runtime.line} ${kind.name}`;
    for (let round = 1; round <= ROUNDS; round++) {
      const shift = (round - 1) % lines.length;
      for (const runtime of [...lines.slice(shift), ...lines.slice(0, shift)]) {
        const plain = await start(runtime, false, 18200);
        const traced = await start(runtime, true, 18201);
        try {
          for (const kind of kinds) {
            const server = kind.traced === true ? traced : plain;
            if (kind.name === 'POST /api/v1/orders') await vacuumAnalyze(); // the last round's orders
            const label = `round ${round}  node ${runtime.version.padEnd(9)} ${kind.name.padEnd(48)}`;
            try {
              await wrk(server, kind.lua, WARM_UP);
              const m = await wrk(server, kind.lua, DURATION);
              results.set(key(runtime, kind), [...(results.get(key(runtime, kind)) ?? []), m]);
              console.log(`${label} ${f0(m.rps)} req/s  ${f1(m.serverUs)} µs/req  p99 ${f2(m.p99)} ms`);
            } catch (error) {
              // A measurement the host spoiled (the service shed load it could not serve in time, a
              // wrk that failed): said, and left out of the medians, rather than ending the run.
              console.log(`${label} left out: ${error instanceof Error ? error.message : String(error)}`);
            }
          }
        } finally {
          await stopServer(plain);
          await stopServer(traced);
        }
      }
    }

    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
    /** A figure, or a dash where every round of it was left out. */
    const shown = (format: (x: number) => string) => (x: number) => (Number.isFinite(x) ? format(x) : '–');
    const ratio = shown((x) => `${f2(x)}×`);
    const of = (runtime: Runtime, kind: Kind, pick: (m: Measurement) => number) =>
      median((results.get(key(runtime, kind)) ?? []).map(pick));
    const [first] = lines;
    const rows = [
      ['case', ...lines.flatMap((r) => [`${r.version} req/s`, 'p99 ms', 'µs/req', `× ${first?.line ?? ''}`])],
    ];
    for (const kind of kinds) {
      rows.push([
        kind.name,
        ...lines.flatMap((r) => [
          shown(f0)(of(r, kind, (m) => m.rps)),
          shown(f2)(of(r, kind, (m) => m.p99)),
          shown(f1)(of(r, kind, (m) => m.serverUs)),
          first === undefined ? '' : ratio(of(r, kind, (m) => m.rps) / of(first, kind, (m) => m.rps)),
        ]),
      ]);
    }
    // Tracing's cost on each line: on (10%) against off, req/s and CPU per request.
    const [get, , , tracedGet] = kinds;
    if (get !== undefined && tracedGet !== undefined)
      rows.push([
        'tracing 10% against off (req/s; CPU)',
        ...lines.flatMap((r) => [
          ratio(of(r, tracedGet, (m) => m.rps) / of(r, get, (m) => m.rps)),
          '',
          ratio(of(r, get, (m) => m.serverUs) / of(r, tracedGet, (m) => m.serverUs)),
          '',
        ]),
      ]);
    console.log(
      `\n${table(rows)}\n\n${ROUNDS} round${ROUNDS === 1 ? '' : 's'} of ${DURATION} s (medians), a new process per line and round; OTLP bytes received: ${f0(sink.bytes())}`,
    );
  } finally {
    sink.close();
  }
}
