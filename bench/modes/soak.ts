import { judgeSoak, sampledWhile, SOAK_LINES, type Slice } from '../soak.js';
import {
  DB_URL,
  POOL,
  PRODUCTS,
  SLICE,
  SOAK_MINUTES,
  USERS,
  anchor,
  byId,
  f0,
  f1,
  f2,
  flag,
  orders,
  rssMiB,
  script,
  seed,
  service,
  stopServer,
  table,
  wrk,
} from '../lib/common.js';

/** The control after a soak: pairs of a soaked slice and a new process's slice, and their length. */
const CONTROL_PAIRS = 6;
const CONTROL_SECONDS = 15;
/** A new process's warm-up before the control: the JIT's work and a new pool's first orders stay out. */
const CONTROL_WARM_UP = 10;
/**
 * Seconds of each load before its first slice: a new process's first minute under load is its
 * warm-up (the JIT, the young generation growing to its working size: RSS highs 210 → 325 MiB,
 * 3,940 → 7,483 req/s), not a baseline for decay.
 */
const SOAK_WARM_UP = Number(process.env.BENCH_SOAK_WARM_UP ?? 60);

/**
 * GET by id, then the mixed load, each SOAK_MINUTES without pause, in 30-s slices; after each, a
 * new process of the same build beside the soaked one (bench/soak.ts). With --soak-decaying, the
 * instrument itself is checked: the GET load on bare node:http + postgres.js with `max: 4`, the
 * shape that decays (docs/benchmark-log.md), which the verdict must call "decays".
 */
export async function soak(): Promise<void> {
  const env = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  const decaying = flag('--soak-decaying');
  // Seeded through a process of its own, so that the soaked process and the new one of the
  // control have served nothing else.
  console.log(`seeding ${USERS} users and ${PRODUCTS} products…`);
  const seeder = await service('service-pg-seed', 18090, env);
  await seed(seeder.port);
  await stopServer(seeder);
  const start = (name: string, port: number) =>
    decaying ? anchor(name, port, 'pg', DB_URL, '4') : service(name, port, env);
  const soaked = await start(decaying ? 'anchor-pg-max-4' : 'service-pg', 18083);
  const loads: [string, string][] = [['GET /api/v1/users/{id}', script('soak-get', byId('/api/v1/users/', USERS))]];
  if (!decaying) loads.push(['mixed: 90% GET by id, 10% POST /api/v1/orders', script('soak-mixed', orders(10))]);
  const what = decaying ? 'bare node:http + postgres.js max: 4 (known to decay)' : `pool ${POOL}`;
  let failed = 0;
  for (const [name, lua] of loads) {
    console.log(
      `\nsoak: ${name}, ${SOAK_MINUTES} min in ${SLICE}-s slices after ${SOAK_WARM_UP} s of warm-up, ${what}`,
    );
    if (SOAK_WARM_UP > 0) await wrk(soaked, lua, SOAK_WARM_UP);
    const slices: Slice[] = [];
    const rows = [['slice', 'req/s', 'p99 ms', 'server µs/req', 'PostgreSQL µs/req', 'RSS MiB: low', 'median', 'high']];
    for (let s = 0; s < (SOAK_MINUTES * 60) / SLICE; s++) {
      const [m, rss] = await sampledWhile(
        () => wrk(soaked, lua, SLICE),
        () => rssMiB(soaked.pid),
      );
      slices.push({ rps: m.rps, rss });
      const sorted = [...rss].sort((a, b) => a - b);
      rows.push([
        `${s * SLICE}–${(s + 1) * SLICE} s`,
        f0(m.rps),
        f2(m.p99),
        f0(m.serverUs),
        f0(m.postgresUs),
        f1(sorted[0] ?? NaN),
        f1(sorted[sorted.length >> 1] ?? NaN),
        f1(sorted.at(-1) ?? NaN),
      ]);
      console.log((rows.at(-1) ?? []).join('  '));
    }
    // The control: a new process, warmed up, measured beside the soaked one in interleaved pairs.
    const fresh = await start(`${soaked.name}-new`, 18088);
    await wrk(fresh, lua, CONTROL_WARM_UP);
    const control = { soaked: [] as number[], fresh: [] as number[] };
    for (let i = 0; i < CONTROL_PAIRS; i++) {
      control.soaked.push((await wrk(soaked, lua, CONTROL_SECONDS)).rps);
      control.fresh.push((await wrk(fresh, lua, CONTROL_SECONDS)).rps);
      console.log(
        `control ${i + 1}/${CONTROL_PAIRS}: soaked ${f0(control.soaked[i] ?? NaN)} req/s, new ${f0(control.fresh[i] ?? NaN)}`,
      );
    }
    await stopServer(fresh);
    const v = judgeSoak(slices, SLICE, control);
    if (!v.holds) failed++;
    console.log(
      `\n${table(rows)}\n\nagainst a new process (${CONTROL_PAIRS} interleaved pairs of ${CONTROL_SECONDS} s): ${f2(v.againstFresh ?? NaN)}× (≥ ${SOAK_LINES.throughput}); ` +
        `last minute / first minute: ${f2(v.lastOverFirst)}×; fitted trend, end / start: ${f2(v.trend)}×; ` +
        `RSS, last minute / first, of a sample a second: median ${f2(v.rss.median)}× (≤ ${SOAK_LINES.rss}), lows ${f2(v.rss.low)}×, highs ${f2(v.rss.high)}×: ${v.holds ? 'holds' : 'DECAYS'}`,
    );
  }
  await stopServer(soaked);
  console.log(failed === 0 ? '\nthe soak holds' : `\n${failed} soak(s) decay`);
}
