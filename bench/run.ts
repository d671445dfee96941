// npm run bench: the service against its anchors, measured from outside Node.
//
// The load generator is wrk (Debian's package, installed here when missing), pinned to the
// last core; the servers are pinned to the first one, so the instrument never competes with
// what it measures. PostgreSQL is pinned to the load core too (BENCH_POSTGRES_CORE), so that the
// server core runs only the server, the anchor and the service alike.
// Every case reports req/s, p50/p99 and the CPU µs per request of the server process and of
// PostgreSQL, read from /proc. Rounds are interleaved, so machine noise falls on every side.
//
//   npm run bench                     the ratio table (BENCH_DURATION s × BENCH_ROUNDS rounds)
//   npm run bench -- --soak           GET by id, then the mixed load (90% reads, 10% orders),
//                                     BENCH_SOAK_MINUTES each without pause, in 30-s slices, then
//                                     the soaked process beside a new one (the control)
//   npm run bench -- --soak --soak-decaying
//                                     the same GET soak on a server known to decay (postgres.js
//                                     max: 4): the instrument must say so
//   npm run bench -- --pool           the mixed load at each DATABASE_POOL_SIZE of BENCH_POOLS
//   npm run bench -- --only 'GET'     only the cases whose name matches (anchors always run)
//   npm run bench -- --first-wave     a new instance's first second of orders against its next two
//                                     (p99), a new process each of BENCH_ROUNDS rounds
//   npm run bench -- --topologies     GET by id and POST /api/v1/orders directly, through PgBouncer
//                                     in transaction mode, and with a read replica configured
//   npm run bench -- --tracing        GET by id with tracing off, and on at 10% sampling exporting
//                                     to a local OTLP sink (BENCH_TRACING_BASELINE=<ref>: also the
//                                     build of that ref, without the tracing code paths)
//   npm run bench -- --scale          lists at 1M users and 1M orders (seeded through SQL): p50/p95
//                                     of first pages, deep pages by every sort, and rel="next"
//   npm run bench -- --webhooks       one subscription to a receiver on 127.0.0.1: the time from
//                                     POST /api/v1/orders' answer to its delivery (p50/p99), events
//                                     delivered per second with the backlog, and POST /api/v1/orders
//                                     with the subscription against the same with it paused
//   npm run bench -- --profile        where the CPU of GET by id and of the liveness probe goes,
//                                     from a V8 CPU profile of BENCH_PROFILE_SECONDS (default 20)
//                                     of load after 5 s of warm-up (bench/profile.ts)
//
// BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/resource_api_bench) is
// dropped and created afresh. BENCH_CONNECTIONS (default 64) wrk connections.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import postgres from 'postgres';
import { DEFAULT_POOL_SIZE } from '../src/config.js';
import { PARTS, profileShares } from './profile.js';
import { judgeSoak, sampledWhile, SOAK_LINES, type Slice } from './soak.js';

const ROOT = join(import.meta.dirname, '..');
const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const option = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);

const DURATION = Number(process.env.BENCH_DURATION ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const SOAK_MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
const SLICE = 30;
/** Seconds of a case's own load before it is measured, in each round. */
const WARM_UP = Number(process.env.BENCH_WARM_UP ?? 3);
const POOL = Number(process.env.DATABASE_POOL_SIZE ?? DEFAULT_POOL_SIZE);
const DB_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/resource_api_bench';
const only = option('--only');
const ONLY = only === undefined ? undefined : new RegExp(only);
const USERS = 1000;
const PRODUCTS = 100;
const SECRET = 'benchmark-secret-benchmark-secret-benchmark';
const ORIGIN = 'https://app.example.com';
const TOKEN = await new SignJWT({
  scope: 'admin users:read users:write orders:read orders:write products:read products:write webhooks:write',
})
  .setProtectedHeader({ alg: 'HS256' })
  .setSubject('1')
  .setExpirationTime('4h')
  .sign(new TextEncoder().encode(SECRET));

// ---- processes, pinned ----------------------------------------------------------------------

const cores = availableParallelism();
const SERVER_CORE = '0';
const LOAD_CORE = String(cores - 1);
const pin = (core: string, command: [string, ...string[]]): [string, ...string[]] =>
  cores >= 2 ? ['taskset', '-c', core, ...command] : command;
const work = mkdtempSync(join(tmpdir(), 'resource-api-bench-'));

const children: ChildProcess[] = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

interface Server {
  name: string;
  port: number;
  pid: number;
  child: ChildProcess;
}

/** Starts a server pinned to the server core; its output goes to a file, as a log shipper would read it. */
async function startServer(name: string, port: number, script: string[], env: Record<string, string>): Promise<Server> {
  const log = join(work, `${name}.log`);
  const fd = openSync(log, 'w');
  const [command, ...rest] = pin(SERVER_CORE, [process.execPath, ...script]);
  const child = spawn(command, rest, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', fd, fd],
  });
  children.push(child);
  const exited = new Promise<never>((_, reject) =>
    child.on('exit', (code) =>
      reject(new Error(`${name} exited with ${code}: ${readFileSync(log, 'utf8').slice(-2000)}`)),
    ),
  );
  for (let i = 0; i < 600; i++) {
    const text = readFileSync(log, 'utf8');
    if (/resource-api ready|^ready$/m.test(text)) return { name, port, pid: child.pid ?? 0, child };
    await Promise.race([new Promise((r) => setTimeout(r, 100)), exited]);
  }
  throw new Error(`${name} did not start: ${readFileSync(log, 'utf8').slice(-2000)}`);
}

async function stopServer(server: Server): Promise<void> {
  server.child.removeAllListeners('exit');
  server.child.kill('SIGTERM');
  await new Promise((r) => server.child.once('exit', r));
}

// ---- CPU and memory from /proc ----------------------------------------------------------------

const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

function cpuTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime
  } catch {
    return 0;
  }
}

/**
 * CPU ticks of every PostgreSQL process, by pid (backends come and go), and what it is: `backend`
 * for a client's connection, else its title (`walwriter`, `autovacuum worker`, `checkpointer`…).
 */
function postgresTicks(): Map<number, { ticks: number; kind: string }> {
  const out = new Map<number, { ticks: number; kind: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const kind = /\(\d+\)|\[local\]/.test(title) ? 'backend' : (title.split(': ').at(-1) ?? title);
      out.set(Number(entry), { ticks: cpuTicks(Number(entry)), kind });
    } catch {
      // gone
    }
  }
  return out;
}

/** PostgreSQL's CPU ticks between two readings, by kind of process. */
function postgresDelta(
  before: Map<number, { ticks: number }>,
  after: Map<number, { ticks: number; kind: string }>,
): Map<string, number> {
  const byKind = new Map<string, number>();
  for (const [pid, { ticks, kind }] of after) {
    const delta = ticks - (before.get(pid)?.ticks ?? 0);
    if (delta > 0) byKind.set(kind, (byKind.get(kind) ?? 0) + delta);
  }
  return byKind;
}

/**
 * Where PostgreSQL runs (BENCH_POSTGRES_CORE): `load` (default) pins every PostgreSQL process to
 * the load core, beside wrk, so the server core runs the server alone, as it would beside a
 * database on another machine; `server` pins them beside the servers; `none` leaves them to the
 * scheduler. Unpinned, where the scheduler happened to put the backends that serve a process
 * (beside it or beside wrk) decided its rate by up to 1.5×, so two processes of one build were
 * not comparable (docs/benchmark-log.md, "Partial runs F"). Backends inherit the postmaster's
 * affinity, so the ones opened later are pinned too; every process is given all cores back at exit.
 */
const POSTGRES_CORE = process.env.BENCH_POSTGRES_CORE ?? 'load';

function postgresPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

function pinPostgres(cpus: string): void {
  for (const pid of postgresPids()) {
    try {
      execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      // exited meanwhile, or not ours to pin (then it runs where the scheduler puts it)
    }
  }
}

function placePostgres(): string {
  if (cores < 2 || POSTGRES_CORE === 'none') return 'PostgreSQL not pinned';
  if (POSTGRES_CORE !== 'load' && POSTGRES_CORE !== 'server')
    throw new Error(`BENCH_POSTGRES_CORE must be load, server or none, not ${POSTGRES_CORE}`);
  const core = POSTGRES_CORE === 'load' ? LOAD_CORE : SERVER_CORE;
  pinPostgres(core);
  process.on('exit', () => pinPostgres(`0-${cores - 1}`));
  process.on('SIGINT', () => process.exit(130));
  process.on('SIGTERM', () => process.exit(143));
  return `PostgreSQL on core ${core}`;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

// ---- wrk ------------------------------------------------------------------------------------

function ensureWrk(): void {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
  } catch (error) {
    // wrk --version exits 1 after printing; only a missing binary throws ENOENT.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return;
    console.log('installing wrk (Debian package)…');
    execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk'], {
      stdio: 'inherit',
    });
  }
}

const DONE = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"us":%d,"errors":%d,"status":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
`;

/** A wrk script: `paths` cycles through requests; `every` mixes in a POST every n-th request. */
function script(name: string, lua: string): string {
  const file = join(work, `${name}.lua`);
  writeFileSync(file, `${lua}\n${DONE}`);
  return file;
}

const byId = (prefix: string, count: number) => `
local n = 0
request = function()
  n = n + 1
  return wrk.format('GET', '${prefix}' .. (n % ${count} + 1))
end`;

const fixed = (path: string) => `
request = function()
  return wrk.format('GET', '${path}')
end`;

const notModified = (count: number) => `
local n = 0
request = function()
  n = n + 1
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  headers['If-None-Match'] = '"1"'
  return wrk.format('GET', '/api/products/' .. (n % ${count} + 1), headers)
end`;

const orders = (everyNth: number) => `
local n = 0
request = function()
  n = n + 1
  if n % ${everyNth} == 0 then
    local headers = {}
    for k, v in pairs(wrk.headers) do headers[k] = v end
    headers['Content-Type'] = 'application/json'
    return wrk.format('POST', '/api/v1/orders', headers, '{"productId":' .. (n % ${PRODUCTS} + 1) .. ',"quantity":1}')
  end
  return wrk.format('GET', '/api/v1/users/' .. (n % ${USERS} + 1))
end`;

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  serverUs: number;
  postgresUs: number;
  /** Of postgresUs, in PostgreSQL's own processes (WAL writer, autovacuum, checkpointer…), not in backends. */
  postgresBackgroundUs: number;
  postgresByKind: Record<string, number>;
  requests: number;
}

function wrk(server: Server, lua: string, seconds: number): Promise<Measurement> {
  return new Promise((resolve, reject) => {
    const before = { server: cpuTicks(server.pid), pg: postgresTicks() };
    const [command, ...rest] = pin(LOAD_CORE, [
      'wrk',
      '-t1',
      `-c${CONNECTIONS}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-s',
      lua,
      '-H',
      `Authorization: Bearer ${TOKEN}`,
      '-H',
      `Origin: ${ORIGIN}`,
      `http://127.0.0.1:${server.port}`,
    ]);
    const child = spawn(command, rest, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (code !== 0 || line === undefined) return reject(new Error(`wrk exited with ${code}: ${out}`));
      const r = JSON.parse(line) as {
        requests: number;
        us: number;
        errors: number;
        status: number;
        p50: number;
        p99: number;
      };
      if (r.errors > 0 || r.status > 0)
        return reject(new Error(`${server.name}: ${r.errors} socket errors, ${r.status} responses not 2xx/3xx`));
      const byKind = postgresDelta(before.pg, postgresTicks());
      const pgTicks = [...byKind.values()].reduce((a, b) => a + b, 0);
      const serverTicks = cpuTicks(server.pid) - before.server;
      resolve({
        rps: r.requests / (r.us / 1e6),
        p50: r.p50 / 1000,
        p99: r.p99 / 1000,
        serverUs: (serverTicks * TICK_US) / r.requests,
        postgresUs: (pgTicks * TICK_US) / r.requests,
        postgresBackgroundUs: ((pgTicks - (byKind.get('backend') ?? 0)) * TICK_US) / r.requests,
        postgresByKind: Object.fromEntries([...byKind].map(([k, t]) => [k, (t * TICK_US) / r.requests])),
        requests: r.requests,
      });
    });
  });
}

// ---- data -----------------------------------------------------------------------------------

async function recreateDatabase(): Promise<void> {
  const url = new URL(DB_URL);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.unsafe(`create database ${name}`);
  await admin.end();
}

async function call(port: number, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  const text = await response.text();
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

/** Users 1..USERS and products 1..PRODUCTS with plenty of stock, through the API. */
async function seed(port: number): Promise<void> {
  for (let i = 0; i < USERS; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, USERS - i) }, (_, j) =>
        call(port, 'POST', '/api/v1/users', {
          name: `Seed ${i + j}`,
          email: `seed${i + j}@example.com`,
          password: 'benchmark-password',
        }),
      ),
    );
  }
  for (let i = 1; i <= PRODUCTS; i++) {
    await call(port, 'POST', '/api/products', {
      sku: `SKU-${i}`,
      name: `Product ${i}`,
      description: 'Benchmark product',
      price: 9.99,
    });
    await call(port, 'PUT', `/api/stock/${i}`, { available: 2_000_000_000 });
  }
}

// ---- servers --------------------------------------------------------------------------------

const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const serviceEnv = (port: number, extra: Record<string, string>) => ({
  NODE_ENV: 'production',
  PORT: String(port),
  HOST: '127.0.0.1',
  JWT_SECRET: SECRET,
  // One key for every service of a run: they share the bench database's encrypted secrets.
  ENCRYPTION_KEY,
  LOG_LEVEL: 'info',
  LOG_FORMAT: 'json',
  CORS_ALLOWED_ORIGINS: ORIGIN,
  METRICS_PORT: String(port + 1000),
  // Quotas on and counted, but never reached (docs/api-guide.md#rate-limits); the cases below compare them off.
  RATE_LIMIT_PER_MINUTE: '1000000000',
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1000000000',
  ...extra,
});

const service = (name: string, port: number, extra: Record<string, string>) =>
  startServer(name, port, ['--enable-source-maps', 'dist/src/server.js'], serviceEnv(port, extra));
const anchor = (name: string, port: number, ...anchorArgs: string[]) =>
  startServer(
    name,
    port,
    ['--import', 'tsx', 'bench/anchors.ts', ...anchorArgs.slice(0, 1), String(port), ...anchorArgs.slice(1)],
    {},
  );

function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map(
      (r, ri) =>
        r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ') +
        (ri === 0 ? `\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : ''),
    )
    .join('\n');
}

const f0 = (x: number) => Math.round(x).toLocaleString('en-US');
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);

// ---- modes ----------------------------------------------------------------------------------

interface Case {
  name: string;
  slot: Slot;
  lua: string;
  anchor?: string;
  /** The ratio this case must reach against its anchor (issue: performance under sustained load). */
  target?: number;
  /**
   * Another anchor the same measurement is read against, with no target: a row of its own in the
   * table, so that what the service adds can be told from what its stack or its queries cost.
   */
  alsoAgainst?: string;
}

/**
 * What autovacuum does on a production database, and not on one where it is off (as on this
 * machine): the dead rows of the last round's writes (stock, row counts) cleared, and the
 * tables' statistics brought up to date before the next round. Run between measurements, never
 * during. Not after the seed: in the one run that did, with statistics of an empty orders table
 * that nothing updated while round 1 filled it, round 1's orders cost PostgreSQL 899 µs each
 * against 356–398 in every other round (a production database analyzes again within a minute).
 */
async function vacuumAnalyze(): Promise<void> {
  const sql = postgres(DB_URL, { max: 1, onnotice: () => {} });
  try {
    await sql`vacuum analyze`;
  } finally {
    await sql.end();
  }
}

/**
 * A server of the ratio table, started afresh before every round after the first. A process
 * is a draw: where its memory, its threads and its PostgreSQL backends land moves its rate by up
 * to 1.5× here (docs/benchmark-log.md, "Partial runs F" and "Run G"), and a draw kept for the whole
 * run weighs on every round alike. A new process per round makes each round a new draw, so the
 * medians compare builds, not draws. Each case is warmed up (WARM_UP s of its own load) before it
 * is measured.
 */
class Slot {
  #server: Server | undefined;
  constructor(
    readonly start: () => Promise<Server>,
    /** Whether it is started again each round (the PGlite service keeps its seeded memory). */
    readonly fresh: boolean,
  ) {}
  get server(): Server {
    if (this.#server === undefined) throw new Error('not started');
    return this.#server;
  }
  async restart(): Promise<void> {
    if (this.#server !== undefined) {
      if (!this.fresh) return;
      await stopServer(this.#server);
    }
    this.#server = await this.start();
  }
}

async function ratios(): Promise<void> {
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
      name: 'GET /api/v1/users/{id}',
      slot: pg,
      lua: script('get-by-id', byId('/api/v1/users/', USERS)),
      anchor: 'anchor: node:http + postgres.js by id',
      target: 0.7,
    },
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
      await wrk(c.slot.server, c.lua, WARM_UP); // its own load, unmeasured: the JIT's work stays out
      const m = await wrk(c.slot.server, c.lua, DURATION);
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
    if (c.alsoAgainst !== undefined && also !== undefined)
      rows.push([
        `  the same, against ${c.alsoAgainst.replace(/^anchor: /, '')}`,
        ...figures,
        `${f2(s.rps / also.rps)}×`,
        '',
        '',
      ]);
  }
  console.log(
    `\nwrk: ${CONNECTIONS} connections on core ${LOAD_CORE}; servers on core ${SERVER_CORE}; ${postgresPlace}; ${DURATION} s × ${ROUNDS} interleaved rounds (medians); pool ${POOL}; Node ${process.version}; production features on (token check, CORS, info logging to a file, metrics)\n`,
  );
  console.log(table(rows));
  console.log(failed === 0 ? '\nevery ratio meets its target' : `\n${failed} case(s) miss their target`);
}

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
async function soak(): Promise<void> {
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

/**
 * A new instance's first orders: a fresh process, 3 s of reads, then orders from 64 connections.
 * The p99 of their first second against the next two seconds' shows what a new instance's first
 * wave pays for connections that have never run the order statement (src/db/prepared.ts,
 * warmUp, docs/benchmark-log.md). Each round is a new process on the same seeded database.
 */
async function firstWave(): Promise<void> {
  const env = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  const seeder = await service('service-pg-seed', 18090, env);
  console.log(`seeding ${USERS} users and ${PRODUCTS} products, and 10 s of orders…`);
  await seed(seeder.port);
  const lua = script('first-wave-orders', orders(1));
  await wrk(seeder, lua, 10);
  await stopServer(seeder);
  const rows = [['round', 'warm-up ms', 'first 1 s: orders/s', 'p99 ms', 'next 2 s: orders/s', 'p99 ms', 'ratio']];
  const ratios: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    await vacuumAnalyze();
    const server = await service('service-pg-first-wave', 18083, env);
    const ready = readFileSync(join(work, 'service-pg-first-wave.log'), 'utf8')
      .split('\n')
      .find((line) => line.includes('resource-api ready'));
    const warmUpMs = ready === undefined ? NaN : Number((JSON.parse(ready) as { warmUpMs?: number }).warmUpMs);
    await wrk(server, script('first-wave-reads', byId('/api/v1/users/', USERS)), 3);
    const first = await wrk(server, lua, 1);
    const next = await wrk(server, lua, 2);
    await stopServer(server);
    ratios.push(first.p99 / next.p99);
    rows.push([
      String(round),
      f0(warmUpMs),
      f0(first.rps),
      f2(first.p99),
      f0(next.rps),
      f2(next.p99),
      `${f2(first.p99 / next.p99)}×`,
    ]);
    console.log((rows.at(-1) ?? []).join('  '));
  }
  const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)] ?? NaN;
  console.log(`
pool ${POOL}, ${CONNECTIONS} connections, Node ${process.version}

${table(rows)}
`);
  console.log(
    `first second's p99 / the next two seconds', median: ${f2(median)}× (≤ 2×): ${median <= 2 ? 'met' : 'NOT met'}`,
  );
}

/** The mixed load at several pool sizes, to choose DATABASE_POOL_SIZE's default. */
async function pools(): Promise<void> {
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

// ---- topologies -------------------------------------------------------------------------------

/**
 * What the production topologies cost a request (docs/benchmark-log.md, "Topologies"): the same
 * database directly and through PgBouncer in transaction mode (.ci/pgbouncer.sh, on its own
 * port), and an instance with a read replica configured against one without. The replica list
 * names a server that is not a standby, so that every read still goes to the primary: the
 * figure is what the read path adds (the caller's position, the replica choice, a write's
 * position), not a second database's capacity. Interleaved rounds, a new process each round.
 */
async function topologies(): Promise<void> {
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
    const loads: [string, string][] = [
      ['GET /api/v1/users/{id}', script('topology-get', byId('/api/v1/users/', USERS))],
      ['POST /api/v1/orders', script('topology-orders', orders(1))],
    ];
    const results = new Map<string, Measurement[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [kind, env] of kinds) {
        await vacuumAnalyze();
        const server = await service(`service-${kind.replace(/\W+/g, '-')}`, 18083, env);
        for (const [load, lua] of loads) {
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
    const rows = [['case', 'req/s', 'p99 ms', 'server µs/req', 'PostgreSQL µs/req', 'against direct']];
    for (const [load] of loads) {
      const direct = median((results.get(`${load}|direct`) ?? []).map((m) => m.rps));
      for (const [kind] of kinds) {
        const ms = results.get(`${load}|${kind}`) ?? [];
        const rps = median(ms.map((m) => m.rps));
        rows.push([
          `${load}, ${kind}`,
          f0(rps),
          f2(median(ms.map((m) => m.p99))),
          f1(median(ms.map((m) => m.serverUs))),
          f1(median(ms.map((m) => m.postgresUs))),
          kind === 'direct' ? '' : `${f2(rps / direct)}×`,
        ]);
      }
    }
    console.log(`\n${table(rows)}`);
  } finally {
    execFileSync('sh', ['-c', `kill "$(cat ${bouncer}/pgbouncer.pid)"`]);
  }
}

// ---- tracing ----------------------------------------------------------------------------------

/** An OTLP/HTTP sink on 127.0.0.1: accepts every export and counts the bytes (the load core's). */
async function otlpSink(): Promise<{ port: number; bytes: () => number; close: () => void }> {
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, bytes: () => bytes, close: () => server.close() };
}

/**
 * `npm run bench -- --tracing`: GET /api/v1/users/{id} with tracing off, and on with 10% of
 * traces sampled (parentbased_traceidratio 0.1) exporting OTLP/HTTP protobuf to a sink on
 * 127.0.0.1; with BENCH_TRACING_BASELINE=<git ref>, also the build of that ref (one without the
 * tracing code paths), on the same database. Interleaved rounds, each starting with another
 * case, a new process each.
 */
async function tracingCost(): Promise<void> {
  const sink = await otlpSink();
  const ref = process.env.BENCH_TRACING_BASELINE;
  let baseline: string | undefined;
  if (ref !== undefined) {
    const dir = join(work, 'baseline');
    execFileSync('git', ['worktree', 'add', '--detach', dir, ref], { cwd: ROOT, stdio: 'ignore' });
    execFileSync('ln', ['-s', join(ROOT, 'node_modules'), join(dir, 'node_modules')]);
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: dir, stdio: 'inherit' });
    baseline = join(dir, 'dist/src/server.js');
  }
  const base = { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) };
  try {
    const seeder = await service('service-pg-seed', 18090, base);
    await seed(seeder.port);
    await stopServer(seeder);
    const traced = {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    };
    const kinds: [string, () => Promise<Server>][] = [
      ['tracing off', () => service('service-tracing-off', 18083, base)],
      ['tracing on, 10% sampled', () => service('service-tracing-on', 18083, { ...base, ...traced })],
    ];
    if (baseline !== undefined) {
      // The same database: the ref's migrations are a prefix of this build's (a ref older than
      // the last migration it lacks would refuse to start).
      const file = baseline;
      kinds.unshift([
        `without tracing code (${ref ?? ''})`,
        () => startServer('service-baseline', 18083, ['--enable-source-maps', file], serviceEnv(18083, base)),
      ]);
    }

    const lua = script('tracing-get', byId('/api/v1/users/', USERS));
    const results = new Map<string, Measurement[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      // Each round starts with another case, so that no case always runs first.
      for (const [kind, start] of [
        ...kinds.slice((round - 1) % kinds.length),
        ...kinds.slice(0, (round - 1) % kinds.length),
      ]) {
        await vacuumAnalyze();
        const server = await start();
        await wrk(server, lua, WARM_UP);
        const m = await wrk(server, lua, DURATION);
        results.set(kind, [...(results.get(kind) ?? []), m]);
        console.log(
          `round ${round}  ${kind.padEnd(40)} ${f0(m.rps)} req/s  ${f1(m.serverUs)} µs/req  p99 ${f2(m.p99)} ms`,
        );
        await stopServer(server);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const rps = (kind: string) => median((results.get(kind) ?? []).map((m) => m.rps));
    const rows = [['GET /api/v1/users/{id}', 'req/s', 'p99 ms', 'server µs/req', 'ratio']];
    const off = rps('tracing off');
    const without = rps(kinds[0]?.[0] ?? '');
    for (const [kind] of kinds) {
      const ms = results.get(kind) ?? [];
      const against =
        kind === 'tracing off'
          ? baseline === undefined
            ? ''
            : `${f2(off / without)}× of the build without`
          : kind.startsWith('tracing on')
            ? `${f2(rps(kind) / off)}× of off`
            : '';
      rows.push([
        kind,
        f0(rps(kind)),
        f2(median(ms.map((m) => m.p99))),
        f1(median(ms.map((m) => m.serverUs))),
        against,
      ]);
    }
    console.log(`\n${table(rows)}\n\nOTLP bytes received by the sink: ${f0(sink.bytes())}`);
  } finally {
    sink.close();
    if (baseline !== undefined)
      execFileSync('git', ['worktree', 'remove', '--force', join(work, 'baseline')], { cwd: ROOT });
  }
}

// ---- profile ----------------------------------------------------------------------------------

const PROFILE_SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 20);

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
async function profile(): Promise<void> {
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

// ---- lists at scale ---------------------------------------------------------------------------

const SCALE_ROWS = Number(process.env.BENCH_SCALE_ROWS ?? 1_000_000);
const SCALE_SAMPLES = 20;

/** Seeds SCALE_ROWS users and orders through SQL, in the orders the lists do not use. */
async function seedAtScale(): Promise<void> {
  const sql = postgres(DB_URL, { max: 1, onnotice: () => {} });
  const started = performance.now();
  // Names, e-mails and creation times in an order of their own, not the ids'; 100,000 customers
  // with about ten orders each; statuses, totals and times scattered.
  await sql`insert into users (name, email, password_hash, created_at)
    select 'User ' || substr(md5(g::text), 1, 12), substr(md5((g * 7)::text), 1, 8) || g || '@example.com', 'x',
           timestamptz '2025-01-01' + ((g * 7919) % ${SCALE_ROWS}) * interval '1 second'
      from generate_series(1::bigint, ${SCALE_ROWS}::bigint) g`;
  await sql`insert into orders (customer_id, status, total, item_count, created_at)
    select 1 + (g * 7919) % 100000,
           (array['PENDING','CONFIRMED','SHIPPED','DELIVERED','CANCELLED'])[1 + (g * 31) % 5],
           ((g * 104729) % 100000) / 100.0, 1,
           timestamptz '2025-01-01' + ((g * 6151) % ${SCALE_ROWS}) * interval '1 second'
      from generate_series(1::bigint, ${SCALE_ROWS}::bigint) g`;
  await sql`vacuum analyze users`;
  await sql`vacuum analyze orders`;
  await sql`checkpoint`; // the load's dirty pages written now, not during the measurements
  console.log(
    `seeded ${f0(SCALE_ROWS)} users and ${f0(SCALE_ROWS)} orders in ${f1((performance.now() - started) / 1000)} s`,
  );
  await sql.end();
}

/** p50 and p95 of SCALE_SAMPLES sequential requests on one keep-alive connection (after 3 to warm up). */
async function latency(port: number, path: string): Promise<{ p50: number; p95: number; link: string }> {
  const times: number[] = [];
  let link = '';
  for (let i = 0; i < SCALE_SAMPLES + 3; i++) {
    const started = performance.now();
    const { status, headers } = await new Promise<{ status: number; headers: http.IncomingHttpHeaders }>(
      (resolve, reject) => {
        http
          .get(
            { host: '127.0.0.1', port, path, agent: keepAlive, headers: { authorization: `Bearer ${TOKEN}` } },
            (r) => {
              r.resume();
              r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers }));
            },
          )
          .on('error', reject);
      },
    );
    const ms = performance.now() - started;
    if (status !== 200) throw new Error(`${path}: ${status}`);
    link = String(headers.link ?? '');
    if (i >= 3) times.push(ms);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? NaN;
  return { p50: at(0.5), p95: at(0.95), link };
}
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });

async function scale(): Promise<void> {
  const pg = await service('service-pg-scale', 18083, { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) });
  await seedAtScale();
  const deep = 25_000;
  const cases: [string, string, number][] = [
    ['GET /api/v1/users/{id}', '/api/v1/users/500000', 10],
    ['one customer’s orders', '/api/v1/orders?customerId=4242', 10],
    ['users, first page', '/api/v1/users?page=0', 10],
    ['orders, first page', '/api/v1/orders?page=0', 10],
    ['orders ?status=PENDING, first page', '/api/v1/orders?status=PENDING&page=0', 10],
  ];
  for (const sort of ['id', 'createdAt', 'email', 'name']) {
    for (const dir of ['asc', 'desc']) {
      cases.push([
        `users page ${f0(deep)}, sort=${sort},${dir}`,
        `/api/v1/users?page=${deep}&sort=${sort},${dir}`,
        100,
      ]);
    }
  }
  for (const sort of ['createdAt', 'id', 'total', 'status']) {
    for (const dir of ['desc', 'asc']) {
      cases.push([
        `orders page ${f0(deep)}, sort=${sort},${dir}`,
        `/api/v1/orders?page=${deep}&sort=${sort},${dir}`,
        100,
      ]);
    }
  }
  cases.push(['orders ?status=PENDING page 5,000', '/api/v1/orders?status=PENDING&page=5000', 100]);
  const last = SCALE_ROWS / 20 - 1;
  cases.push([`users, last page (${f0(last)}), sort=name,asc`, `/api/v1/users?page=${last}&sort=name,asc`, 10]);
  cases.push([`orders, last page (${f0(last)}), default sort`, `/api/v1/orders?page=${last}`, 10]);
  const rows = [['request', 'p50 ms', 'p95 ms', 'target p50', 'met']];
  let missed = 0;
  const record = (name: string, r: { p50: number; p95: number }, target: number) => {
    const met = r.p50 <= target;
    if (!met) missed++;
    rows.push([name, f2(r.p50), f2(r.p95), `≤ ${target} ms`, met ? 'yes' : '**no**']);
    console.log(rows.at(-1)?.join('  '));
  };
  const nextLinks: [string, string][] = [];
  for (const [name, path, target] of cases) {
    const r = await latency(pg.port, path);
    record(name, r, target);
    const next = /<https?:\/\/[^/]+([^>]*)>; rel="next"/.exec(r.link)?.[1];
    if (next !== undefined && name.includes(`page ${f0(deep)}`)) nextLinks.push([name, next]);
  }
  for (const [name, next] of nextLinks) record(`rel="next" from ${name}`, await latency(pg.port, next), 10);
  console.log(`\n${table(rows)}\n\n${missed === 0 ? 'every target met' : `${missed} target(s) missed`}`);
  await stopServer(pg);
}

// ---- webhooks ---------------------------------------------------------------------------------

const WEBHOOK_SECONDS = Number(process.env.BENCH_WEBHOOK_SECONDS ?? 30);

/** A receiver on 127.0.0.1 that answers 204 and notes when each order's event arrived. */
async function webhookReceiver(): Promise<{ port: number; arrivals: Map<string, number>; count: () => number }> {
  const arrivals = new Map<string, number>();
  let count = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      count++;
      const subject = /"subject":"([^"]+)"/.exec(Buffer.concat(chunks).toString())?.[1];
      if (subject !== undefined && !arrivals.has(subject)) arrivals.set(subject, at);
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, arrivals, count: () => count };
}

/** webhook_pending from the service's metrics port. */
async function pendingDeliveries(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port + 1000}/metrics`)).text();
  return Number(/^webhook_pending (\S+)/m.exec(text)?.[1] ?? NaN);
}

interface DeliveryFigures {
  created: number;
  p50: number;
  p99: number;
  max: number;
  deliveredPerSecond: number;
  pending: number[];
}

/**
 * Waits (30 s at most) until every event in `sentAt` (subject → when its write was known to be
 * committed) has arrived, and returns the latencies from then to arrival and the last backlog.
 */
async function deliveryFigures(
  port: number,
  receiver: Awaited<ReturnType<typeof webhookReceiver>>,
  sentAt: Map<string, number>,
  deliveredPerSecond: number,
  pending: number[],
): Promise<DeliveryFigures> {
  for (let i = 0; i < 300 && [...sentAt.keys()].some((k) => !receiver.arrivals.has(k)); i++)
    await new Promise((r) => setTimeout(r, 100));
  pending.push(await pendingDeliveries(port));
  const latencies = [...sentAt]
    .map(([subject, at]) => (receiver.arrivals.get(subject) ?? Infinity) - at)
    .sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { created: sentAt.size, p50: q(0.5), p99: q(0.99), max: latencies.at(-1) ?? NaN, deliveredPerSecond, pending };
}

/**
 * Creates orders at `perSecond` for `seconds` (from this process, on the load core), noting
 * when each answer arrived; returns the latencies to delivery and the delivery rate.
 */
async function pacedOrders(
  port: number,
  receiver: Awaited<ReturnType<typeof webhookReceiver>>,
  perSecond: number,
  seconds: number,
): Promise<DeliveryFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const answered = new Map<string, number>();
  const post = (product: number) =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ productId: product, quantity: 1 });
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/v1/orders',
          agent,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => {
            const at = performance.now();
            if (res.statusCode !== 201) return reject(new Error(`POST /api/v1/orders: ${res.statusCode} ${text}`));
            answered.set(`orders/${(JSON.parse(text) as { id: number }).id}`, at);
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const delivered0 = receiver.count();
  const pending: number[] = [];
  const sampler = setInterval(() => void pendingDeliveries(port).then((n) => pending.push(n)), 5000);
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  let sent = 0;
  while (performance.now() - started < seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * perSecond);
    for (; sent < due; sent++) inFlight.push(post((sent % PRODUCTS) + 1));
    await new Promise((r) => setTimeout(r, 2));
  }
  await Promise.all(inFlight);
  const elapsed = (performance.now() - started) / 1000;
  const deliveredPerSecond = (receiver.count() - delivered0) / elapsed;
  clearInterval(sampler);
  agent.destroy();
  return deliveryFigures(port, receiver, answered, deliveredPerSecond, pending);
}

/**
 * Events written straight into the database at `perSecond` for `seconds`, in batches every
 * 20 ms, each followed by a NOTIFY: what another instance's writes look like to this one. The
 * service only delivers them, so the figure is its dispatcher's, not its POST handler's.
 */
async function sqlEvents(
  port: number,
  receiver: Awaited<ReturnType<typeof webhookReceiver>>,
  perSecond: number,
  seconds: number,
): Promise<DeliveryFigures> {
  const db = postgres(DB_URL, { max: 1, onnotice: () => {} });
  const committed = new Map<string, number>();
  const delivered0 = receiver.count();
  const pending: number[] = [];
  const sampler = setInterval(() => void pendingDeliveries(port).then((n) => pending.push(n)), 5000);
  const started = performance.now();
  let sent = 0;
  let next = 2_000_000_000 + Math.floor(Math.random() * 1_000_000) * 1000;
  while (performance.now() - started < seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * perSecond);
    const count = due - sent;
    if (count > 0) {
      const first = next;
      next += count;
      await db`
        with e as (
          insert into events (id, type, subject, time, data, owner)
          select gen_random_uuid(), 'order.updated', 'orders/' || g, now(), '{"id":' || g || '}', 1
            from generate_series(${first}::bigint, ${first + count - 1}::bigint) g
          returning sequence, type, subject
        )
        insert into webhook_deliveries (subscription_id, event_sequence, subject)
        select s.id, e.sequence, e.subject
          from e join webhook_subscriptions s
            on s.enabled and s.events && array[e.type, split_part(e.type, '.', 1) || '.*', '*']`;
      await db`select pg_notify('resource_api_webhooks', 'bench')`;
      const at = performance.now();
      for (let g = first; g < first + count; g++) committed.set(`orders/${g}`, at);
      sent = due;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const elapsed = (performance.now() - started) / 1000;
  const deliveredPerSecond = (receiver.count() - delivered0) / elapsed;
  clearInterval(sampler);
  await db.end();
  return deliveryFigures(port, receiver, committed, deliveredPerSecond, pending);
}

async function webhooks(): Promise<void> {
  const receiver = await webhookReceiver();
  const pg = await service('service-pg-webhooks', 18083, {
    DATABASE_URL: DB_URL,
    DATABASE_POOL_SIZE: String(POOL),
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', // the receiver is on 127.0.0.1
  });
  console.log(`seeding ${USERS} users and ${PRODUCTS} products…`);
  await seed(pg.port);
  const subscription = (await call(pg.port, 'POST', '/api/v1/webhook-subscriptions', {
    url: `http://127.0.0.1:${receiver.port}/hook`,
    events: ['order.*'],
    description: 'benchmark receiver',
  })) as { id: number };
  const enable = (enabled: boolean) =>
    call(pg.port, 'PATCH', `/api/v1/webhook-subscriptions/${subscription.id}`, { enabled });

  const rows = [['run', 'orders', 'delivered/s', 'p50 ms', 'p99 ms', 'max ms', 'webhook_pending (every 5 s)']];
  const latencyRun = async (perSecond: number) => {
    const r = await pacedOrders(pg.port, receiver, perSecond, WEBHOOK_SECONDS);
    rows.push([
      `${perSecond} orders/s for ${WEBHOOK_SECONDS} s`,
      f0(r.created),
      f0(r.deliveredPerSecond),
      f1(r.p50),
      f1(r.p99),
      f1(r.max),
      r.pending.map((n) => f0(n)).join(' '),
    ]);
    console.log(rows.at(-1)?.join('  '));
    return r;
  };
  const healthy = await latencyRun(50);
  const mixed = await latencyRun(Number(process.env.BENCH_WEBHOOK_RATE ?? 600));
  const rate = Number(process.env.BENCH_WEBHOOK_RATE ?? 600);
  const busy = await sqlEvents(pg.port, receiver, rate, WEBHOOK_SECONDS);
  rows.push([
    `${rate} events/s written by another writer, ${WEBHOOK_SECONDS} s`,
    f0(busy.created),
    f0(busy.deliveredPerSecond),
    f1(busy.p50),
    f1(busy.p99),
    f1(busy.max),
    busy.pending.map((n) => f0(n)).join(' '),
  ]);
  console.log(rows.at(-1)?.join('  '));

  // POST /api/v1/orders under wrk: the subscription active, or paused (no delivery is queued).
  const vacuum = postgres(DB_URL, { max: 1, onnotice: () => {} });
  await vacuum`vacuum analyze webhook_deliveries`;
  const withOne: Measurement[] = [];
  const without: Measurement[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const active of [true, false]) {
      await enable(active);
      // This process does nothing during the run but receive the deliveries: its CPU is the
      // receiver's, which a real deployment spends on another machine, and this one on the load core.
      const cpu0 = process.cpuUsage();
      const m = await wrk(pg, script(`orders-webhook-${active}`, orders(1)), DURATION);
      const cpu = process.cpuUsage(cpu0);
      // What the run left undelivered: a dispatcher that falls behind looks cheaper in the
      // run's figures, and pays after it (below, until the backlog is gone).
      const left = active ? await pendingDeliveries(pg.port) : 0;
      (active ? withOne : without).push(m);
      console.log(
        `round ${round}/${ROUNDS} POST /api/v1/orders, ${active ? 'one subscription' : 'none'}: ${f0(m.rps)} req/s, ` +
          `p99 ${f1(m.p99)} ms, ${f0(m.serverUs)} µs server + ${f0(m.postgresUs)} µs PostgreSQL ` +
          `+ ${f0((cpu.user + cpu.system) / m.requests)} µs receiver per request, ${f0(left)} left undelivered ` +
          `(${Object.entries(m.postgresByKind)
            .sort((x, y) => y[1] - x[1])
            .map(([k, us]) => `${k} ${f0(us)}`)
            .join(', ')})`,
      );
      // The next round starts with no backlog, and with the dead rows of the last one vacuumed:
      // this machine's PostgreSQL runs with autovacuum off, and without it every round finds
      // more of them in the deliveries' indexes (the poll's scan walks them) than production would.
      for (let i = 0; i < 600 && (await pendingDeliveries(pg.port)) > 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      await vacuum`vacuum analyze webhook_deliveries`;
    }
  }
  await vacuum.end();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const a = median(withOne.map((m) => m.rps));
  const b = median(without.map((m) => m.rps));
  const growth = (busy.pending.at(-2) ?? 0) - (busy.pending[0] ?? 0);
  console.log(
    `(the ${rate} orders/s run creates the orders through this instance on its one core as well: ` +
      `p99 ${f1(mixed.p99)} ms, ${f0(mixed.deliveredPerSecond)} delivered/s; reported, not a target)`,
  );
  const checks = [
    ['delivery latency p50 (50 orders/s)', `${f1(healthy.p50)} ms`, '≤ 50 ms', healthy.p50 <= 50],
    ['delivery latency p99 (50 orders/s)', `${f1(healthy.p99)} ms`, '≤ 1,000 ms', healthy.p99 <= 1000],
    ['delivery latency p99 (events from another writer)', `${f1(busy.p99)} ms`, '≤ 1,000 ms', busy.p99 <= 1000],
    [
      'events delivered per second (from another writer)',
      f0(busy.deliveredPerSecond),
      '≥ 500, backlog not growing',
      busy.deliveredPerSecond >= 500 && growth <= 100,
    ],
    [
      'POST /api/v1/orders, one subscription / none',
      `${f0(a)} / ${f0(b)} req/s = ${f2(a / b)}×`,
      '≥ 0.9×',
      a / b >= 0.9,
    ],
  ] as const;
  console.log(`\nreceiver on 127.0.0.1 (answers 204), pool ${POOL}, Node ${process.version}\n\n${table(rows)}\n`);
  console.log(
    table([['figure', 'measured', 'target', 'met'], ...checks.map(([n, m, t, ok]) => [n, m, t, ok ? 'yes' : 'NO'])]),
  );
  const missed = checks.filter((c) => !c[3]).length;
  console.log(missed === 0 ? '\nevery webhook target met' : `\n${missed} webhook target(s) missed`);
  await stopServer(pg);
}

ensureWrk();
const postgresPlace = placePostgres();
console.log(`${postgresPlace}; building…`);
execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
await recreateDatabase();
if (flag('--soak')) await soak();
else if (flag('--pool')) await pools();
else if (flag('--scale')) await scale();
else if (flag('--profile')) await profile();
else if (flag('--first-wave')) await firstWave();
else if (flag('--topologies')) await topologies();
else if (flag('--tracing')) await tracingCost();
else if (flag('--webhooks')) {
  // This process receives the deliveries and paces the orders: keep it on the load core, off the server's.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await webhooks();
} else await ratios();
process.exit(0);
