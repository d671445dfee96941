import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  CONNECTIONS,
  type Case,
  DB_URL,
  DURATION,
  LOAD_CORE,
  type Measurement,
  ONLY,
  POOL,
  ROOT,
  PRODUCTS,
  ROUNDS,
  SERVER_CORE,
  Slot,
  USERS,
  WARM_UP,
  anchor,
  buildAt,
  byId,
  f0,
  f1,
  f2,
  fixed,
  notModified,
  orders,
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
} from '../lib/common.js';

export async function ratios(): Promise<void> {
  const pgEnv = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  // The database is seeded through a process of its own, so that every measured server has
  // served only its warm-up and its cases.
  console.log(`seeding ${USERS} users and ${PRODUCTS} products on each engine…`);
  const seeder = await service('service-pg-seed', 18090, pgEnv);
  await seed(seeder.port);
  await stopServer(seeder);
  const pg = new Slot(() => service('service-pg', 18083, pgEnv), true);
  const lite = new Slot(async () => {
    const server = await service('service-pglite', 18084, { DATABASE_URL: 'memory://' });
    await seed(server.port);
    return server;
  }, false);
  // The same database, quotas off, and quotas in Redis (REDIS_URL, default the local one).
  const unlimited = new Slot(
    () =>
      service('service-pg-no-limits', 18086, {
        ...pgEnv,
        RATE_LIMIT_PER_MINUTE: '0',
        RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
      }),
    true,
  );
  const redis = new Slot(
    () =>
      service('service-pg-redis', 18087, { ...pgEnv, REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }),
    true,
  );
  const http = new Slot(() => anchor('anchor-http', 18081, 'http'), true);
  const pgAnchor = new Slot(() => anchor('anchor-pg', 18082, 'pg', DB_URL), true);
  const liteAnchor = new Slot(() => anchor('anchor-pglite', 18085, 'pglite', String(USERS)), true);
  const namedAnchor = new Slot(() => anchor('anchor-pglite-named', 18089, 'pglite-named', String(USERS)), true);
  const fastifyAnchor = new Slot(() => anchor('anchor-fastify', 18091, 'fastify'), true);
  const expressAnchor = new Slot(() => anchor('anchor-express', 18092, 'express', DB_URL), true);
  // BENCH_BASELINE=<git ref>: the same GET cases on that ref's build too (an A/B in one run), with
  // BENCH_BASELINE_PATCH (a diff) applied if given. It runs on the same database: its migrations
  // must be those of this build, or a prefix of them.
  const baselineRef = process.env.BENCH_BASELINE;
  const baselineScript =
    baselineRef === undefined ? undefined : buildAt(baselineRef, 'baseline', process.env.BENCH_BASELINE_PATCH);
  const baseline =
    baselineScript === undefined
      ? undefined
      : new Slot(
          () =>
            startServer('service-baseline', 18093, ['--enable-source-maps', baselineScript], serviceEnv(18093, pgEnv)),
          true,
        );
  const byIdLua = script('get-by-id', byId('/api/v1/users/', USERS));

  const cases: Case[] = [
    { name: 'anchor: node:http fixed JSON', slot: http, lua: script('fixed', byId('/api/v1/users/', USERS)) },
    {
      name: 'anchor: node:http + postgres.js by id',
      slot: pgAnchor,
      lua: script('anchor-pg', byId('/api/v1/users/', USERS)),
    },
    {
      name: 'anchor: node:http + PGlite by id',
      slot: liteAnchor,
      lua: script('anchor-pglite', byId('/api/v1/users/', USERS)),
    },
    {
      name: 'anchor: node:http + PGlite by id, named statement',
      slot: namedAnchor,
      lua: script('anchor-pglite-named', byId('/api/v1/users/', USERS)),
    },
    {
      // The floor of the decided stack for the probe's answer: what Fastify and the six headers
      // every answer carries cost before any of the service's own work (docs/benchmark-log.md, "Not reached").
      name: 'anchor: Fastify route, the probe answer + its six headers',
      slot: fastifyAnchor,
      lua: script('anchor-fastify', fixed('/api/public/health/live')),
    },
    {
      name: 'anchor: Express 5 + node-postgres by id',
      slot: expressAnchor,
      lua: script('anchor-express', byId('/api/v1/users/', USERS)),
    },
    {
      name: 'anchor: node:http + postgres.js by id, 1 connection',
      slot: pgAnchor,
      lua: byIdLua,
      connections: 1,
    },
    {
      name: 'GET /api/v1/users/{id}',
      slot: pg,
      lua: byIdLua,
      anchor: 'anchor: node:http + postgres.js by id',
      target: 0.7,
      alsoAgainst: 'anchor: Express 5 + node-postgres by id',
      alsoTarget: 3.5,
    },
    {
      name: 'GET /api/v1/users/{id}, 1 connection',
      slot: pg,
      lua: byIdLua,
      connections: 1,
      anchor: 'anchor: node:http + postgres.js by id, 1 connection',
    },
    ...(baseline === undefined
      ? []
      : [
          {
            name: `GET /api/v1/users/{id}, ${baselineRef} build`,
            slot: baseline,
            lua: byIdLua,
            anchor: 'anchor: node:http + postgres.js by id',
          },
          {
            name: `GET /api/v1/users/{id}, 1 connection, ${baselineRef} build`,
            slot: baseline,
            lua: byIdLua,
            connections: 1,
            anchor: 'anchor: node:http + postgres.js by id, 1 connection',
          },
          {
            name: `GET /api/products/{id} → 304, ${baselineRef} build`,
            slot: baseline,
            lua: script('not-modified', notModified(PRODUCTS)),
            anchor: 'anchor: node:http + postgres.js by id',
          },
        ]),
    {
      name: 'GET /api/v1/users/{id}, in-process quotas vs off',
      slot: pg,
      lua: script('get-by-id-on', byId('/api/v1/users/', USERS)),
      anchor: 'GET /api/v1/users/{id}, quotas off',
      target: 0.95,
    },
    {
      name: 'GET /api/v1/users/{id}, quotas off',
      slot: unlimited,
      lua: script('get-by-id-off', byId('/api/v1/users/', USERS)),
    },
    {
      name: 'GET /api/v1/users/{id}, quotas in Redis',
      slot: redis,
      lua: script('get-by-id-redis', byId('/api/v1/users/', USERS)),
      anchor: 'GET /api/v1/users/{id}, quotas off',
      target: 0.9,
    },
    {
      name: 'GET /api/products/{id} → 304',
      slot: pg,
      lua: script('not-modified', notModified(PRODUCTS)),
      anchor: 'anchor: node:http + postgres.js by id',
      target: 0.7,
    },
    {
      name: 'GET /api/public/health/live',
      slot: pg,
      lua: script('live', fixed('/api/public/health/live')),
      anchor: 'anchor: node:http fixed JSON',
      target: 0.7,
      // The stack's floor for the same answer: what the service's own per-request work costs.
      alsoAgainst: 'anchor: Fastify route, the probe answer + its six headers',
    },
    {
      name: 'POST /api/v1/orders',
      slot: pg,
      lua: script('orders', orders(1)),
      anchor: 'GET /api/v1/users/{id}',
      target: 0.25,
    },
    {
      name: 'PGlite GET /api/v1/users/{id}',
      slot: lite,
      lua: script('pglite-by-id', byId('/api/v1/users/', USERS)),
      anchor: 'anchor: node:http + PGlite by id',
      target: 0.8,
      // An anchor that queries PGlite the way the service does (a named statement, one
      // exchange): what the service itself adds.
      alsoAgainst: 'anchor: node:http + PGlite by id, named statement',
    },
  ].filter((c) => c.anchor === undefined || ONLY === undefined || ONLY.test(c.name));

  const results = new Map<string, Measurement[]>();
  const slots = [...new Set(cases.map((c) => c.slot))];
  for (let round = 1; round <= ROUNDS; round++) {
    if (round > 1) await vacuumAnalyze(); // the last round's orders
    for (const slot of slots) await slot.restart();
    for (const c of cases) {
      await wrk(c.slot.server, c.lua, WARM_UP, c.connections); // its own load, unmeasured: the JIT's work stays out
      const m = await wrk(c.slot.server, c.lua, DURATION, c.connections);
      results.set(c.name, [...(results.get(c.name) ?? []), m]);
      console.log(
        `round ${round}/${ROUNDS}  ${c.name}: ${f0(m.rps)} req/s, p99 ${f1(m.p99)} ms, ${f0(m.serverUs)} µs server + ${f0(m.postgresUs)} µs PostgreSQL per request`,
      );
    }
  }

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const summary = new Map(
    [...results].map(([name, ms]) => [
      name,
      {
        rps: median(ms.map((m) => m.rps)),
        p50: median(ms.map((m) => m.p50)),
        p99: median(ms.map((m) => m.p99)),
        serverUs: median(ms.map((m) => m.serverUs)),
        postgresUs: median(ms.map((m) => m.postgresUs)),
      },
    ]),
  );
  const rows = [
    ['case', 'req/s', 'p50 ms', 'p99 ms', 'server µs/req', 'PostgreSQL µs/req', 'ratio', 'target', 'p99 ≤ 2× anchor'],
  ];
  let failed = 0;
  for (const c of cases) {
    const s = summary.get(c.name);
    if (s === undefined) continue;
    const a = c.anchor === undefined ? undefined : summary.get(c.anchor);
    const ratio = a === undefined ? undefined : s.rps / a.rps;
    const ok = ratio === undefined || ratio >= (c.target ?? 0);
    // Only a case with a target is judged; POST is compared with GET for throughput only (its
    // latency is a write's).
    const p99ok =
      a === undefined || c.target === undefined || c.target === 0.25 ? '' : s.p99 <= 2 * a.p99 ? 'yes' : 'NO';
    if (!ok || p99ok === 'NO') failed++;
    const figures = [f0(s.rps), f2(s.p50), f2(s.p99), f0(s.serverUs), f0(s.postgresUs)];
    rows.push([
      c.name,
      ...figures,
      ratio === undefined ? '' : `${f2(ratio)}×`,
      c.target === undefined ? '' : `≥ ${c.target}× ${ok ? 'yes' : 'NO'}`,
      p99ok,
    ]);
    const also = c.alsoAgainst === undefined ? undefined : summary.get(c.alsoAgainst);
    if (c.alsoAgainst !== undefined && also !== undefined) {
      const alsoOk = c.alsoTarget === undefined || s.rps / also.rps >= c.alsoTarget;
      if (!alsoOk) failed++;
      rows.push([
        `  the same, against ${c.alsoAgainst.replace(/^anchor: /, '')}`,
        ...figures,
        `${f2(s.rps / also.rps)}×`,
        c.alsoTarget === undefined ? '' : `≥ ${c.alsoTarget}× ${alsoOk ? 'yes' : 'NO'}`,
        '',
      ]);
    }
  }
  console.log(
    `\nwrk: ${CONNECTIONS} connections on core ${LOAD_CORE}; servers on core ${SERVER_CORE}; ${postgresPlace}; ${DURATION} s × ${ROUNDS} interleaved rounds (medians); pool ${POOL}; Node ${process.version}; production features on (token check, CORS, info logging to a file, metrics)\n`,
  );
  console.log(table(rows));
  console.log(failed === 0 ? '\nevery ratio meets its target' : `\n${failed} case(s) miss their target`);
  if (baselineScript !== undefined)
    execFileSync('git', ['worktree', 'remove', '--force', join(baselineScript, '../../..')], { cwd: ROOT });
}
