// npm run bench: load the service's users endpoints on PostgreSQL and on PGlite, next to two
// anchors started here (a bare node:http server, a bare postgres.js server), in interleaved
// rounds so that machine noise falls on every side alike. Prints req/s, p50/p99 and ratios.
//
// BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/resource_api_bench) is
// dropped and created afresh. BENCH_DURATION (s, default 5), BENCH_ROUNDS (3),
// BENCH_CONNECTIONS (32), DATABASE_POOL_SIZE (the service default) tune the run; BENCH_ONLY
// (a regular expression) keeps only the matching targets besides the anchors.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { SignJWT } from 'jose';
import { DEFAULT_POOL_SIZE } from '../src/config.js';

const ROOT = join(import.meta.dirname, '..');
const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const POOL = Number(process.env.DATABASE_POOL_SIZE ?? DEFAULT_POOL_SIZE);
const DB_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/resource_api_bench';
const SEED_USERS = 1000;
const SECRET = 'benchmark-secret-benchmark-secret-benchmark';
// One admin token for every request, as a real client reuses its token until it expires.
const AUTH = `Bearer ${await new SignJWT({ scope: 'admin users:read users:write' }).setProtectedHeader({ alg: 'HS256' }).setSubject('1').setExpirationTime('2h').sign(new TextEncoder().encode(SECRET))}`;
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined; // filter targets (anchors always run)

const children: ChildProcess[] = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

function start(args: string[], env: Record<string, string>, readyWhen: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--enable-source-maps', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      if (out.length < 100_000) out += d.toString();
      if (readyWhen.test(out)) {
        out = '';
        readyWhen = /$^/;
        child.stdout!.resume();
        resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

async function recreateDatabase(): Promise<void> {
  const url = new URL(DB_URL);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${name}`);
  await admin.unsafe(`create database ${name}`);
  await admin.end();
}

async function seed(base: string): Promise<void> {
  for (let i = 0; i < SEED_USERS; i += 50) {
    await Promise.all(
      Array.from({ length: 50 }, (_, j) =>
        fetch(`${base}/api/v1/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: AUTH },
          body: JSON.stringify({ name: `Seed ${i + j}`, email: `seed${i + j}@example.com`, password: 'benchmark-password' }),
        }).then((r) => r.arrayBuffer()),
      ),
    );
  }
}

interface Target {
  name: string;
  url: string;
  anchor?: string;
  post?: boolean;
}

let postCounter = 0;
function load(target: Target): Promise<autocannon.Result> {
  const opts: autocannon.Options = { url: target.url, connections: CONNECTIONS, duration: DURATION, pipelining: 1, headers: { authorization: AUTH } };
  if (target.post) {
    opts.requests = [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: AUTH },
        setupRequest: (req) => ({ ...req, body: JSON.stringify({ name: 'Bench User', email: `bench${process.pid}.${postCounter++}@example.com`, password: 'benchmark-password' }) }),
      },
    ];
  } else {
    // Spread reads over the seeded ids so that no single row is hot.
    opts.requests = [{ setupRequest: (req) => (target.url.endsWith('/__ID__') ? { ...req, path: req.path!.replace('__ID__', String(1 + (postCounter++ % SEED_USERS))) } : req) }];
  }
  return new Promise((resolve, reject) => autocannon(opts, (err, result) => (err ? reject(err) : resolve(result))));
}

async function main(): Promise<void> {
  console.log(`building…`);
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  await recreateDatabase();

  const ports = { http: 18081, pg: 18082, svcPg: 18083, svcLite: 18084 };
  const common = { NODE_ENV: 'production', JWT_SECRET: SECRET, LOG_LEVEL: 'info', LOG_FORMAT: 'json', HOST: '127.0.0.1' };
  await start(['dist/src/server.js'], { ...common, PORT: String(ports.svcPg), DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) }, /resource-api ready/);
  await start(['dist/src/server.js'], { ...common, PORT: String(ports.svcLite), DATABASE_URL: 'memory://' }, /resource-api ready/);
  await start(['--import', 'tsx', 'bench/anchors.ts', 'http', String(ports.http)], {}, /ready/);
  await start(['--import', 'tsx', 'bench/anchors.ts', 'pg', String(ports.pg), DB_URL, String(POOL)], {}, /ready/);
  console.log(`seeding ${SEED_USERS} users on each engine…`);
  await seed(`http://127.0.0.1:${ports.svcPg}`);
  await seed(`http://127.0.0.1:${ports.svcLite}`);

  const allTargets: Target[] = [
    { name: 'anchor: node:http fixed JSON', url: `http://127.0.0.1:${ports.http}/api/v1/users/__ID__` },
    { name: 'anchor: postgres.js by id', url: `http://127.0.0.1:${ports.pg}/api/v1/users/__ID__` },
    { name: 'postgres GET /users/{id}', url: `http://127.0.0.1:${ports.svcPg}/api/v1/users/__ID__`, anchor: 'anchor: postgres.js by id' },
    { name: 'postgres GET /users?size=20', url: `http://127.0.0.1:${ports.svcPg}/api/v1/users?size=20&sort=name`, anchor: 'anchor: postgres.js by id' },
    { name: 'postgres POST /users', url: `http://127.0.0.1:${ports.svcPg}/api/v1/users`, post: true, anchor: 'anchor: node:http fixed JSON' },
    { name: 'pglite GET /users/{id}', url: `http://127.0.0.1:${ports.svcLite}/api/v1/users/__ID__`, anchor: 'anchor: postgres.js by id' },
    { name: 'pglite GET /users?size=20', url: `http://127.0.0.1:${ports.svcLite}/api/v1/users?size=20&sort=name`, anchor: 'anchor: postgres.js by id' },
    { name: 'pglite POST /users', url: `http://127.0.0.1:${ports.svcLite}/api/v1/users`, post: true, anchor: 'anchor: node:http fixed JSON' },
  ];
  const targets = allTargets.filter((t) => t.anchor === undefined || ONLY === undefined || ONLY.test(t.name));
  const runs = new Map<string, autocannon.Result[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const target of targets) {
      const result = await load(target);
      if (result.non2xx > 0 || result.errors > 0) throw new Error(`${target.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
      runs.set(target.name, [...(runs.get(target.name) ?? []), result]);
      process.stdout.write(`round ${round}/${ROUNDS} ${target.name}: ${Math.round(result.requests.average)} req/s\n`);
    }
  }

  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = new Map(targets.map((t) => [t.name, { rps: median(runs.get(t.name)!.map((r) => r.requests.average)), p50: median(runs.get(t.name)!.map((r) => r.latency.p50)), p99: median(runs.get(t.name)!.map((r) => r.latency.p99)) }]));
  console.log(`\n${CONNECTIONS} connections, ${DURATION} s × ${ROUNDS} interleaved rounds (medians), pool ${POOL}, Node ${process.version}\n`);
  console.log(`${'target'.padEnd(32)}${'req/s'.padStart(9)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}   ratio to anchor`);
  for (const t of targets) {
    const s = summary.get(t.name)!;
    const ratio = t.anchor ? `${(s.rps / summary.get(t.anchor)!.rps).toPrecision(2)}× ${t.anchor.replace('anchor: ', '')}` : '';
    console.log(`${t.name.padEnd(32)}${Math.round(s.rps).toString().padStart(9)}${s.p50.toFixed(1).padStart(9)}${s.p99.toFixed(1).padStart(9)}   ${ratio}`);
  }
  process.exit(0);
}

await main();
