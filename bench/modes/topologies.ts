import { execFileSync } from 'node:child_process';
import {
  DB_URL,
  DURATION,
  ONLY,
  type Measurement,
  POOL,
  ROOT,
  ROUNDS,
  USERS,
  WARM_UP,
  byId,
  f0,
  f1,
  f2,
  orders,
  script,
  seed,
  service,
  stopServer,
  table,
  vacuumAnalyze,
  wrk,
} from '../lib/common.js';

// ---- topologies -------------------------------------------------------------------------------

/**
 * What the production topologies cost a request (docs/benchmark-log.md, "Topologies"): the same
 * database directly and through PgBouncer in transaction mode (.ci/pgbouncer.sh, on its own
 * port), and an instance with a read replica configured against one without. The replica list
 * names a server that is not a standby, so that every read still goes to the primary: the
 * figure is what the read path adds (the caller's position, the replica choice, a write's
 * position), not a second database's capacity. Interleaved rounds, each starting with another
 * case, a new process each round.
 */
export async function topologies(): Promise<void> {
  const bouncerPort = 16433;
  const bouncer = execFileSync('bash', ['.ci/pgbouncer.sh', String(bouncerPort)], { cwd: ROOT })
    .toString()
    .trim();
  const pooledUrl = new URL(DB_URL);
  pooledUrl.port = String(bouncerPort);
  const base = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  try {
    const seeder = await service('service-pg-seed', 18090, base);
    await seed(seeder.port);
    await stopServer(seeder);
    const kinds: [string, Record<string, string>][] = [
      ['direct', base],
      [
        'PgBouncer',
        { ...base, DATABASE_URL: pooledUrl.toString(), DATABASE_DIRECT_URL: DB_URL, DATABASE_POOLER: 'transaction' },
      ],
      ['replica configured', { ...base, DATABASE_REPLICA_URLS: DB_URL }],
    ];
    const allLoads: [string, string][] = [
      ['GET /api/v1/users/{id}', script('topology-get', byId('/api/v1/users/', USERS))],
      ['POST /api/v1/orders', script('topology-orders', orders(1))],
    ];
    // --only picks cases by "<load>, <kind>"; each load kept keeps its direct case, the anchor.
    const picked = (load: string, kind: string) => ONLY === undefined || ONLY.test(`${load}, ${kind}`);
    const loads = allLoads.filter(([load]) => kinds.some(([kind]) => picked(load, kind)));
    const runs = (load: string, kind: string) => kind === 'direct' || picked(load, kind);
    const results = new Map<string, Measurement[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      // Each round starts with another case, so that no case always runs first.
      const offset = (round - 1) % kinds.length;
      for (const [kind, env] of [...kinds.slice(offset), ...kinds.slice(0, offset)]) {
        if (!loads.some(([load]) => runs(load, kind))) continue;
        await vacuumAnalyze();
        const server = await service(`service-${kind.replace(/\W+/g, '-')}`, 18083, env);
        for (const [load, lua] of loads) {
          if (!runs(load, kind)) continue;
          await wrk(server, lua, WARM_UP);
          const m = await wrk(server, lua, DURATION);
          const key = `${load}|${kind}`;
          results.set(key, [...(results.get(key) ?? []), m]);
          console.log(
            `round ${round}  ${kind.padEnd(18)} ${load.padEnd(24)} ${f0(m.rps)} req/s  ${f1(m.serverUs)} µs/req`,
          );
        }
        await stopServer(server);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const rows = [
      ['case', 'req/s', 'p99 ms', 'server µs/req', 'PostgreSQL µs/req', 'against direct', 'server CPU against direct'],
    ];
    for (const [load] of loads) {
      const direct = median((results.get(`${load}|direct`) ?? []).map((m) => m.rps));
      const directUs = median((results.get(`${load}|direct`) ?? []).map((m) => m.serverUs));
      for (const [kind] of kinds) {
        const ms = results.get(`${load}|${kind}`) ?? [];
        if (ms.length === 0) continue;
        const rps = median(ms.map((m) => m.rps));
        rows.push([
          `${load}, ${kind}`,
          f0(rps),
          f2(median(ms.map((m) => m.p99))),
          f1(median(ms.map((m) => m.serverUs))),
          f1(median(ms.map((m) => m.postgresUs))),
          kind === 'direct' ? '' : `${f2(rps / direct)}×`,
          kind === 'direct' ? '' : `${f2(median(ms.map((m) => m.serverUs)) / directUs)}×`,
        ]);
      }
    }
    console.log(`\n${table(rows)}`);
  } finally {
    execFileSync('sh', ['-c', `kill "$(cat ${bouncer}/pgbouncer.pid)"`]);
  }
}
