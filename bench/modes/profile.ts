import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PARTS, profileShares } from '../profile.js';
import {
  DB_URL,
  ONLY,
  POOL,
  type Server,
  USERS,
  byId,
  f0,
  fixed,
  script,
  seed,
  serviceEnv,
  startServer,
  stopServer,
  table,
  work,
  wrk,
} from '../lib/common.js';
import { otlpSink } from './tracing.js';

// ---- profile ----------------------------------------------------------------------------------

const PROFILE_SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 20);
/** The ratio of traces the tracing case samples (BENCH_TRACING_SAMPLED; docs/tracing.md's figures are at 0.1). */
const SAMPLED = process.env.BENCH_TRACING_SAMPLED ?? '0.1';

/** Profiles one server under `lua`: the samples of the measured load only, after a warm-up. */
async function profiled(
  name: string,
  start: (nodeArgs: string[]) => Promise<Server>,
  lua: string,
  afterStart: (server: Server) => Promise<void> = async () => {},
): Promise<{ name: string; rps: number; serverUs: number; shares: Map<string, number> }> {
  const dir = join(work, `profile-${name.replace(/\W+/g, '-')}`);
  const server = await start(['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  await afterStart(server);
  const file = script(`profile-${server.name}`, lua);
  await wrk(server, file, 5); // warm-up: the JIT's work stays out of the window
  const started = performance.now();
  const m = await wrk(server, file, PROFILE_SECONDS);
  const ended = performance.now();
  await stopServer(server);
  const exited = performance.now();
  const written = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (written === undefined) throw new Error(`${name}: no CPU profile was written`);
  const { shares, busySamples, leaves } = profileShares(join(dir, written), {
    fromMsBeforeEnd: exited - started,
    toMsBeforeEnd: exited - ended,
  });
  console.log(
    `${name}: ${f0(m.rps)} req/s, ${f0(m.serverUs)} µs of server CPU per request, ${f0(busySamples)} samples`,
  );
  for (const [part, top] of leaves) {
    const named = top.slice(0, 4).map(([leaf, share]) => `${leaf} ${(share * 100).toFixed(1)}%`);
    console.log(`  ${part}: ${named.join(', ')}`);
  }
  console.log(`  (profile: ${join(dir, written)})`);
  return { name, rps: m.rps, serverUs: m.serverUs, shares };
}

/**
 * GET by id, the liveness probe and PGlite GET by id, each beside its anchor (the anchor pays
 * the same HTTP exchange and driver; the rest is what the service adds), one server at a time.
 */
export async function profile(): Promise<void> {
  const port = 18083;
  const env = serviceEnv(port, { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) });
  const service =
    (name: string, extra: Record<string, string> = {}) =>
    (nodeArgs: string[]) =>
      startServer(name, port, [...nodeArgs, '--enable-source-maps', 'dist/src/server.js'], { ...env, ...extra });
  const anchorOf =
    (name: string, ...anchorArgs: [string, ...string[]]) =>
    (nodeArgs: string[]) =>
      startServer(
        name,
        port,
        [...nodeArgs, '--import', 'tsx', 'bench/anchors.ts', anchorArgs[0], String(port), ...anchorArgs.slice(1)],
        {},
      );
  const byIdLua = byId('/api/v1/users/', USERS);
  const probeLua = fixed('/api/public/health/live');
  // Pairs of a case and its anchor; --only picks pairs by the case's name.
  const pairs: [string, () => Promise<Awaited<ReturnType<typeof profiled>>[]>][] = [
    [
      'GET /api/v1/users/{id}',
      async () => [
        // The anchor reads the users the service seeded.
        await profiled('GET /api/v1/users/{id}', service('profile-get'), byIdLua, (s) => seed(s.port)),
        await profiled('anchor: postgres.js', anchorOf('profile-anchor-pg', 'pg', DB_URL), byIdLua),
      ],
    ],
    [
      'GET /api/v1/users/{id}, tracing on',
      async () => {
        // Tracing off beside tracing on at 10% (parentbased_traceidratio 0.1), exporting
        // OTLP/HTTP protobuf to a sink in this process: where the difference goes.
        const sink = await otlpSink();
        try {
          const traced = {
            OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
            OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
            OTEL_TRACES_SAMPLER_ARG: SAMPLED,
          };
          return [
            await profiled('tracing off', service('profile-tracing-off'), byIdLua, (s) => seed(s.port)),
            await profiled(`tracing on, ${Number(SAMPLED) * 100}%`, service('profile-tracing-on', traced), byIdLua),
          ];
        } finally {
          sink.close();
        }
      },
    ],
    [
      'GET /api/public/health/live',
      async () => [
        await profiled('GET /api/public/health/live', service('profile-live'), probeLua),
        await profiled('anchor: node:http', anchorOf('profile-anchor-http', 'http'), probeLua),
      ],
    ],
    [
      'PGlite GET /api/v1/users/{id}',
      async () => [
        await profiled(
          'PGlite GET /api/v1/users/{id}',
          service('profile-pglite', { DATABASE_URL: 'memory://' }),
          byIdLua,
          (s) => seed(s.port),
        ),
        // Like for like: the anchor queries PGlite through the same named statements.
        await profiled(
          'anchor: PGlite, named statement',
          anchorOf('profile-anchor-pglite', 'pglite-named', String(USERS)),
          byIdLua,
        ),
      ],
    ],
  ];
  const columns: Awaited<ReturnType<typeof profiled>>[] = [];
  for (const [name, run] of pairs) if (ONLY === undefined || ONLY.test(name)) columns.push(...(await run()));
  const rows = [['µs of server CPU per request (share)', ...columns.map((c) => c.name)]];
  const first = columns[0]?.shares ?? new Map<string, number>();
  const order = [...PARTS].sort((a, b) => (first.get(b) ?? 0) - (first.get(a) ?? 0));
  for (const part of order) {
    rows.push([
      part,
      ...columns.map((c) => {
        const share = c.shares.get(part) ?? 0;
        return `${f0(share * c.serverUs)} (${(share * 100).toFixed(1)}%)`;
      }),
    ]);
  }
  rows.push(['total', ...columns.map((c) => `${f0(c.serverUs)} at ${f0(c.rps)} req/s`)]);
  console.log(`\n${table(rows)}`);
}
