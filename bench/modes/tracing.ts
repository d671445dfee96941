import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import {
  DB_URL,
  DURATION,
  type Measurement,
  POOL,
  ROOT,
  ROUNDS,
  type Server,
  USERS,
  WARM_UP,
  buildAt,
  byId,
  f0,
  f1,
  f2,
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

// ---- tracing ----------------------------------------------------------------------------------

/** An OTLP/HTTP sink on 127.0.0.1: accepts every export and counts the bytes (the load core's). */
export async function otlpSink(): Promise<{ port: number; bytes: () => number; close: () => void }> {
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, bytes: () => bytes, close: () => server.close() };
}

/** A process's resident memory, MiB ('?' once it has gone). */
function rssMiB(pid: number): string {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? '?' : f0(Number(kb) / 1024);
  } catch {
    return '?';
  }
}

/** The sampled ratios of the tracing-on cases (BENCH_TRACING_SAMPLED, comma-separated; 0.1 by default). */
const SAMPLED = (process.env.BENCH_TRACING_SAMPLED ?? '0.1').split(',').map((r) => r.trim());

/**
 * BENCH_TRACING_FRESH=1: a new process for every case in every round (started, warmed up,
 * measured, stopped) instead of one per case for the whole run. Two processes of one build can
 * differ by 10–25% here for as long as they run (their heaps' layout, what the JIT chose), so one
 * process per case measures which process drew well as much as the case; fresh ones spread that
 * over the rounds, and the medians and paired ratios see it as noise.
 */
const FRESH = process.env.BENCH_TRACING_FRESH === '1';

/**
 * `npm run bench -- --tracing`: GET /api/v1/users/{id} with tracing off, and on with 10% of
 * traces sampled (parentbased_traceidratio 0.1) exporting OTLP/HTTP protobuf to a sink on
 * 127.0.0.1 (on the load core, beside wrk: it reads every body), beside the build without the
 * tracing code paths: this commit (HEAD, so commit first) with bench/patches/without-tracing.patch
 * applied, which takes out what GET by id runs for tracing while it is off; or, with
 * BENCH_TRACING_BASELINE=<git ref>, the build of that ref. The same database; one process per
 * case for the whole run (or per round: BENCH_TRACING_FRESH); interleaved rounds, each starting
 * with another case.
 */
export async function tracingCost(): Promise<void> {
  const sink = await otlpSink();
  const ref = process.env.BENCH_TRACING_BASELINE;
  const patch = join(ROOT, 'bench/patches/without-tracing.patch');
  if (ref === undefined) {
    // The patch takes out what GET by id runs for tracing: a change to a file it touches must carry it along.
    try {
      execFileSync('git', ['apply', '--check', patch], { cwd: ROOT, stdio: 'pipe' });
    } catch (error) {
      throw new Error(
        `bench/patches/without-tracing.patch no longer applies to this tree: make it again (apply it with patch --fuzz in a worktree of HEAD, mend, git diff), or set BENCH_TRACING_BASELINE=<ref>\n${String((error as { stderr?: unknown }).stderr ?? error)}`,
        { cause: error },
      );
    }
  }
  const baseline = buildAt(ref ?? 'HEAD', 'baseline', ref === undefined ? patch : undefined);
  const baselineName = ref === undefined ? 'without tracing code paths' : `without tracing code (${ref})`;
  const base = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  try {
    const seeder = await service('service-pg-seed', 18090, base);
    await seed(seeder.port);
    await stopServer(seeder);
    const traced = (ratio: string) => ({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: ratio,
    });
    // Every case is one process for the whole run, as the instances of a deployment are: started
    // together (each on a port of its own, all on the server core) and each warmed up, then
    // measured in alternating rounds; a cost that grows with the time a process has run shows.
    const kinds: [string, (port: number) => Promise<Server>][] = [
      ['tracing off', (port) => service('service-tracing-off', port, base)],
      ...SAMPLED.map((ratio): [string, (port: number) => Promise<Server>] => [
        `tracing on, ${Number(ratio) * 100}% sampled`,
        (port) => service(`service-tracing-on-${ratio}`, port, { ...base, ...traced(ratio) }),
      ]),
    ];
    // The same database: the baseline's migrations are a prefix of this build's (a ref older
    // than the last migration it lacks would refuse to start).
    kinds.unshift([
      baselineName,
      (port) => startServer('service-baseline', port, ['--enable-source-maps', baseline], serviceEnv(port, base)),
    ]);

    const lua = script('tracing-get', byId('/api/v1/users/', USERS));
    const servers = new Map<string, Server>();
    if (!FRESH) {
      for (const [i, [kind, start]] of kinds.entries()) servers.set(kind, await start(18100 + i));
      for (const server of servers.values()) await wrk(server, lua, WARM_UP);
    }
    const results = new Map<string, Measurement[]>();
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        // Each round starts with another case, so that no case always runs first.
        for (const [kind, start] of [
          ...kinds.slice((round - 1) % kinds.length),
          ...kinds.slice(0, (round - 1) % kinds.length),
        ]) {
          // BENCH_TRACING_FRESH: a process of its own for this round, warmed up first.
          const server = servers.get(kind) ?? (await start(18100 + kinds.findIndex(([k]) => k === kind)));
          try {
            if (FRESH) await wrk(server, lua, WARM_UP);
            await vacuumAnalyze();
            const m = await wrk(server, lua, DURATION);
            results.set(kind, [...(results.get(kind) ?? []), m]);
            console.log(
              `round ${round}  ${kind.padEnd(40)} ${f0(m.rps)} req/s  ${f1(m.serverUs)} µs/req  p99 ${f2(m.p99)} ms  rss ${rssMiB(server.pid)} MiB`,
            );
          } finally {
            if (FRESH) await stopServer(server);
          }
        }
      }
    } finally {
      for (const server of servers.values()) await stopServer(server);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const rps = (kind: string) => median((results.get(kind) ?? []).map((m) => m.rps));
    const us = (kind: string) => median((results.get(kind) ?? []).map((m) => m.serverUs));
    const rows = [
      [
        'GET /api/v1/users/{id}',
        'req/s',
        'p99 ms',
        'server µs/req',
        'ratio (req/s)',
        'ratio (CPU per request)',
        'paired (req/s)',
      ],
    ];
    // The median of the rounds' own ratios: each round's two cases ran minutes apart at most, so
    // the host's drift over a run (the noisy neighbours of a shared VM) cancels within a round.
    const paired = (kind: string, reference: string) => {
      const of = results.get(kind) ?? [];
      const to = results.get(reference) ?? [];
      return `${f2(median(of.map((m, i) => m.rps / (to[i]?.rps ?? Number.NaN))))}×`;
    };
    // Each case against the one before it: off against the build without, on against off.
    const against = (kind: string): [string, string, string] =>
      kind === 'tracing off'
        ? [
            `${f2(rps(kind) / rps(baselineName))}× of the build without`,
            `${f2(us(baselineName) / us(kind))}×`,
            paired(kind, baselineName),
          ]
        : kind.startsWith('tracing on')
          ? [
              `${f2(rps(kind) / rps('tracing off'))}× of off`,
              `${f2(us('tracing off') / us(kind))}×`,
              paired(kind, 'tracing off'),
            ]
          : ['', '', ''];
    for (const [kind] of kinds) {
      const ms = results.get(kind) ?? [];
      rows.push([kind, f0(rps(kind)), f2(median(ms.map((m) => m.p99))), f1(us(kind)), ...against(kind)]);
    }
    console.log(`\n${table(rows)}\n\nOTLP bytes received by the sink: ${f0(sink.bytes())}`);
  } finally {
    sink.close();
  }
}
