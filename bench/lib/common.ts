// What every mode of the bench shares: the processes it starts (pinned), the database and its
// seed, the servers, the table it prints; and, from their own modules, its options (options.ts),
// CPU and memory from /proc (proc.ts) and wrk (wrk.ts). Nothing runs at import: setUp() does
// what must happen once.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import postgres from 'postgres';
import { DB_URL, ORIGIN, PRODUCTS, ROOT, SECRET, USERS, makeWorkDirectory, setToken, TOKEN, work } from './options.js';
import { SERVER_CORE, pin, placePostgres, readClockTick } from './proc.js';

export * from './options.js';
export * from './proc.js';
export * from './wrk.js';

// ---- processes, pinned ----------------------------------------------------------------------

/** What happens once, before any mode: the token, the scratch directory, the clock's tick. */
export async function setUp(): Promise<void> {
  setToken(
    await new SignJWT({
      scope: 'admin users:read users:write orders:read orders:write products:read products:write webhooks:write',
    })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('1')
      .setExpirationTime('4h')
      .sign(new TextEncoder().encode(SECRET)),
  );
  makeWorkDirectory();
  readClockTick();
  ENCRYPTION_KEY = randomBytes(32).toString('base64');
  process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));
}

export const children: ChildProcess[] = [];

export interface Server {
  name: string;
  port: number;
  pid: number;
  child: ChildProcess;
}

/**
 * The Node.js binary the bench's servers run on (the service, the anchors, the bare servers):
 * BENCH_NODE's, a path or a release of the official binaries (`24`, `24.22.3`; the Dockerfile's
 * line alone means the Dockerfile's exact release, what the image ships: officialNode()); else
 * this process's. Resolved at its first use.
 */
export function serverNode(): string {
  return (resolvedNode ??= resolveNode(process.env.BENCH_NODE));
}
let resolvedNode: string | undefined;

function resolveNode(wanted: string | undefined): string {
  if (wanted === undefined || wanted === '') return process.execPath;
  return wanted.includes('/') ? wanted : officialNode(wanted);
}

/**
 * The official Node.js binary of a release (`24.22.3`) or a line (`26`: the newest the registry
 * has; the Dockerfile's line: the Dockerfile's exact release, what the image runs), fetched once
 * into the machine's cache (scripts/container/node-binary.sh) and kept there.
 */
export function officialNode(wanted: string): string {
  const image = /^ARG NODE_VERSION=(\S+)$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1] ?? '';
  const release = image.split('.')[0] === wanted ? image : wanted;
  const dir = execFileSync('bash', [join(ROOT, 'scripts/container/node-binary.sh'), release], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return join(dir, 'bin', 'node');
}

/**
 * Starts a server pinned to the server core; its output goes to a file, as a log shipper would
 * read it. `node`: another Node.js binary than serverNode()'s (the runtimes mode).
 */
export async function startServer(
  name: string,
  port: number,
  script: string[],
  env: Record<string, string>,
  core: string = SERVER_CORE,
  node: string = serverNode(),
): Promise<Server> {
  const log = join(work, `${name}.log`);
  const fd = openSync(log, 'w');
  const [command, ...rest] = pin(core, [node, ...script]);
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
  // Not left registered in the repository once the bench is done (`git worktree list`).
  process.once('exit', () => {
    try {
      execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT, stdio: 'ignore' });
    } catch {
      execFileSync('git', ['worktree', 'prune'], { cwd: ROOT, stdio: 'ignore' });
    }
  });
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
