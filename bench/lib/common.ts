// What every mode of the bench shares: its options, the processes it starts (pinned), their CPU
// and memory from /proc, wrk and its scripts, the database and its seed, the servers, the table
// it prints. Nothing runs at import: setUp() does what must happen once.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import postgres from 'postgres';
import { DEFAULT_POOL_SIZE } from '../../src/config/config.js';

export const ROOT = join(import.meta.dirname, '..', '..');
export const args = process.argv.slice(2);
export const flag = (name: string) => args.includes(name);
export const option = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);

export const DURATION = Number(process.env.BENCH_DURATION ?? 15);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
export const SOAK_MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
export const SLICE = 30;
/** Seconds of a case's own load before it is measured, in each round. */
export const WARM_UP = Number(process.env.BENCH_WARM_UP ?? 3);
export const POOL = Number(process.env.DATABASE_POOL_SIZE ?? DEFAULT_POOL_SIZE);
export const DB_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/resource_api_bench';
export const only = option('--only');
export const ONLY = only === undefined ? undefined : new RegExp(only);
export const USERS = 1000;
export const PRODUCTS = 100;
export const SECRET = 'benchmark-secret-benchmark-secret-benchmark';
export const ORIGIN = 'https://app.example.com';
/** The bearer token every request of the bench sends (set by setUp). */
export let TOKEN = '';

// ---- processes, pinned ----------------------------------------------------------------------

export const cores = availableParallelism();
export const SERVER_CORE = '0';
export const LOAD_CORE = String(cores - 1);
/** What happens once, before any mode: the token, the scratch directory, the clock's tick. */
export async function setUp(): Promise<void> {
  TOKEN = await new SignJWT({
    scope: 'admin users:read users:write orders:read orders:write products:read products:write webhooks:write',
  })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('1')
    .setExpirationTime('4h')
    .sign(new TextEncoder().encode(SECRET));
  work = mkdtempSync(join(tmpdir(), 'resource-api-bench-'));
  TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
  ENCRYPTION_KEY = randomBytes(32).toString('base64');
  process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));
}

export const pin = (core: string, command: [string, ...string[]]): [string, ...string[]] =>
  cores >= 2 ? ['taskset', '-c', core, ...command] : command;
/** The run's scratch directory: servers' logs, wrk scripts (set by setUp). */
export let work = '';

export const children: ChildProcess[] = [];

export interface Server {
  name: string;
  port: number;
  pid: number;
  child: ChildProcess;
}

/** Starts a server pinned to the server core; its output goes to a file, as a log shipper would read it. */
export async function startServer(
  name: string,
  port: number,
  script: string[],
  env: Record<string, string>,
): Promise<Server> {
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

export async function stopServer(server: Server): Promise<void> {
  server.child.removeAllListeners('exit');
  server.child.kill('SIGTERM');
  await new Promise((r) => server.child.once('exit', r));
}

// ---- CPU and memory from /proc ----------------------------------------------------------------

/** µs per clock tick of /proc's CPU times (set by setUp). */
export let TICK_US = 0;

export function cpuTicks(pid: number): number {
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
export function postgresTicks(): Map<number, { ticks: number; kind: string }> {
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
export function postgresDelta(
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
export const POSTGRES_CORE = process.env.BENCH_POSTGRES_CORE ?? 'load';

export function postgresPids(): number[] {
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

export function pinPostgres(cpus: string): void {
  for (const pid of postgresPids()) {
    try {
      execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      // exited meanwhile, or not ours to pin (then it runs where the scheduler puts it)
    }
  }
}

export function placePostgres(): string {
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

export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

// ---- wrk ------------------------------------------------------------------------------------

export function ensureWrk(): void {
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

export const DONE = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"us":%d,"errors":%d,"status":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
`;

/** A wrk script: `paths` cycles through requests; `every` mixes in a POST every n-th request. */
export function script(name: string, lua: string): string {
  const file = join(work, `${name}.lua`);
  writeFileSync(file, `${lua}\n${DONE}`);
  return file;
}

export const byId = (prefix: string, count: number) => `
local n = 0
request = function()
  n = n + 1
  return wrk.format('GET', '${prefix}' .. (n % ${count} + 1))
end`;

export const fixed = (path: string) => `
request = function()
  return wrk.format('GET', '${path}')
end`;

export const notModified = (count: number) => `
local n = 0
request = function()
  n = n + 1
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  headers['If-None-Match'] = '"1"'
  return wrk.format('GET', '/api/products/' .. (n % ${count} + 1), headers)
end`;

export const orders = (everyNth: number) => `
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

export interface Measurement {
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

export function wrk(server: Server, lua: string, seconds: number, connections = CONNECTIONS): Promise<Measurement> {
  return new Promise((resolve, reject) => {
    const before = { server: cpuTicks(server.pid), pg: postgresTicks() };
    const [command, ...rest] = pin(LOAD_CORE, [
      'wrk',
      '-t1',
      `-c${connections}`,
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

export async function recreateDatabase(): Promise<void> {
  const url = new URL(DB_URL);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.unsafe(`create database ${name}`);
  await admin.end();
}

export async function call(port: number, method: string, path: string, body?: unknown): Promise<unknown> {
  const send = () =>
    fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  let response = await send();
  // As a well-behaved client does: a 503 with Retry-After (the service shed it, unstarted: a burst
  // of password hashes can do that on the embedded engine) is sent again after the wait.
  for (let tries = 1; response.status === 503 && response.headers.has('retry-after') && tries < 10; tries++) {
    await response.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after')) * 1000));
    response = await send();
  }
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  const text = await response.text();
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

/** Users 1..USERS and products 1..PRODUCTS with plenty of stock, through the API. */
export async function seed(port: number): Promise<void> {
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

/** One key for every service of a run (set by setUp). */
export let ENCRYPTION_KEY = '';
export const serviceEnv = (port: number, extra: Record<string, string>) => ({
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

/**
 * The service's build: this checkout's, or BENCH_SERVICE's (another build's dist/src/server.js,
 * for an A/B of two commits under the same harness); BENCH_SERVICE_NODE_ARGS adds Node options
 * (`--cpu-prof --cpu-prof-dir=…`).
 */
const SERVICE_SCRIPT = process.env.BENCH_SERVICE ?? 'dist/src/server.js';
const SERVICE_NODE_ARGS = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');

export const service = (name: string, port: number, extra: Record<string, string>) =>
  startServer(name, port, [...SERVICE_NODE_ARGS, '--enable-source-maps', SERVICE_SCRIPT], serviceEnv(port, extra));
export const anchor = (name: string, port: number, ...anchorArgs: string[]) =>
  startServer(
    name,
    port,
    ['--import', 'tsx', 'bench/anchors.ts', ...anchorArgs.slice(0, 1), String(port), ...anchorArgs.slice(1)],
    {},
  );

export function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map(
      (r, ri) =>
        r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ') +
        (ri === 0 ? `\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : ''),
    )
    .join('\n');
}

export const f0 = (x: number) => Math.round(x).toLocaleString('en-US');
export const f1 = (x: number) => x.toFixed(1);
export const f2 = (x: number) => x.toFixed(2);

// ---- modes ----------------------------------------------------------------------------------

export interface Case {
  name: string;
  slot: Slot;
  lua: string;
  /** wrk's connections for this case (default BENCH_CONNECTIONS). */
  connections?: number;
  anchor?: string;
  /** The ratio this case must reach against its anchor (issue: performance under sustained load). */
  target?: number;
  /**
   * Another anchor the same measurement is read against, with no target: a row of its own in the
   * table, so that what the service adds can be told from what its stack or its queries cost.
   */
  alsoAgainst?: string;
  /** The ratio the case must reach against `alsoAgainst`. */
  alsoTarget?: number;
}

/**
 * The service as built from git `ref`, in a worktree of the bench's work directory (the same
 * node_modules), with `patch` applied if given: dist/src/server.js of that build.
 */
export function buildAt(ref: string, name: string, patch?: string): string {
  const dir = join(work, name);
  execFileSync('git', ['worktree', 'add', '--detach', dir, ref], { cwd: ROOT, stdio: 'ignore' });
  if (patch !== undefined) execFileSync('git', ['apply', patch], { cwd: dir, stdio: 'inherit' });
  execFileSync('ln', ['-s', join(ROOT, 'node_modules'), join(dir, 'node_modules')]);
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: dir, stdio: 'inherit' });
  return join(dir, 'dist/src/server.js');
}

/**
 * What autovacuum does on a production database, and not on one where it is off (as on this
 * machine): the dead rows of the last round's writes (stock, row counts) cleared, and the
 * tables' statistics brought up to date before the next round. Run between measurements, never
 * during. Not after the seed: in the one run that did, with statistics of an empty orders table
 * that nothing updated while round 1 filled it, round 1's orders cost PostgreSQL 899 µs each
 * against 356–398 in every other round (a production database analyzes again within a minute).
 */
export async function vacuumAnalyze(): Promise<void> {
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
export class Slot {
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

/** Where PostgreSQL was placed (placePostgres), for the modes' headers. */
export let postgresPlace = '';

export function placeAndRemember(): string {
  postgresPlace = placePostgres();
  return postgresPlace;
}
