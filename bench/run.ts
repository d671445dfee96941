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
//                                     to a local OTLP sink, beside HEAD without its tracing code
//                                     paths (bench/patches/without-tracing.patch; or
//                                     BENCH_TRACING_BASELINE=<ref>: the build of that ref)
//   npm run bench -- --scale          lists at 1M users and 1M orders (seeded through SQL): p50/p95
//                                     of first pages, deep pages by every sort, and rel="next"
//   npm run bench -- --webhooks       one subscription to a receiver on 127.0.0.1: the time from
//                                     POST /api/v1/orders' answer to its delivery (p50/p99), events
//                                     delivered per second with the backlog, and POST /api/v1/orders
//                                     with the subscription against the same with it paused
//   npm run bench -- --overload       one instance offered 1×, 2× and 3× its capacity C in an open
//                                     loop (2-s client time-out, a probe beside), then 0.5× C: goodput,
//                                     statuses, time-outs, p99 of admitted requests and of 503s,
//                                     for GET by id, a list page and orders on one product
//   npm run bench -- --crowds        crowds of 64, 256 and 1,000 clients in a closed loop (no think
//                                     time, Retry-After ignored) against this build and the same with
//                                     OVERLOAD_PROTECTION=false, alternating rounds: GET by id, the list
//                                     page, orders on one product (each side warmed on a request for
//                                     BENCH_CROWDS_WARM_UP s, 15, first); then a change of mix (GET by
//                                     id, then the list page at once)
//   npm run bench -- --side-by-side   this build and BENCH_BASELINE's (a git ref, BENCH_BASELINE_PATCH
//                                     applied if given) at the same moment on the server core, each
//                                     with its own wrk: the ratio of their CPU per request, round by
//                                     round (GET by id, the 304 read): an A/B that the host's swings
//                                     fall on both sides of; BENCH_SIDE_TRACING=<ratio> instead:
//                                     this build with tracing on beside it with tracing off
//   npm run bench -- --runtimes       the service on Node.js 20, 24 and 26 (BENCH_RUNTIMES; official
//                                     binaries, fetched once into the machine's cache), interleaved:
//                                     GET by id, the 304 read, orders, and tracing at 10% against off
//   npm run bench -- --profile        where the CPU of GET by id and of the liveness probe goes,
//                                     from a V8 CPU profile of BENCH_PROFILE_SECONDS (default 20)
//                                     of load after 5 s of warm-up (bench/profile.ts)
//
// BENCH_NODE (a path, or a release of the official binaries: `24`, `24.22.3`; the Dockerfile's
// line alone is its exact release) is the Node.js the servers run on, by default this process's.
// BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/resource_api_bench) is
// dropped and created afresh. BENCH_CONNECTIONS (default 64) wrk connections. Each mode is a
// file of bench/modes/; what they share is bench/lib/common.ts.
import { execFileSync } from 'node:child_process';
import {
  LOAD_CORE,
  ROOT,
  cores,
  ensureWrk,
  flag,
  placeAndRemember,
  recreateDatabase,
  serverNode,
  setUp,
} from './lib/common.js';
import { crowds } from './modes/crowds.js';
import { firstWave } from './modes/first-wave.js';
import { overload } from './modes/overload.js';
import { pools } from './modes/pools.js';
import { profile } from './modes/profile.js';
import { ratios } from './modes/ratios.js';
import { runtimes } from './modes/runtimes.js';
import { scale } from './modes/scale.js';
import { sideBySide } from './modes/side-by-side.js';
import { soak } from './modes/soak.js';
import { topologies } from './modes/topologies.js';
import { tracingCost } from './modes/tracing.js';
import { webhooks } from './modes/webhooks.js';

ensureWrk();
await setUp();
const postgresPlace = placeAndRemember();
console.log(
  `${postgresPlace}; servers on Node.js ${execFileSync(serverNode(), ['--version'], { encoding: 'utf8' }).trim()}; building…`,
);
execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
await recreateDatabase();
if (flag('--soak')) await soak();
else if (flag('--pool')) await pools();
else if (flag('--scale')) await scale();
else if (flag('--profile')) {
  // The OTLP sink of the tracing case runs in this process: on the load core, off the server's.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await profile();
} else if (flag('--side-by-side')) {
  // With BENCH_SIDE_TRACING, the OTLP sink runs in this process: on the load core, off the servers'.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await sideBySide();
} else if (flag('--first-wave')) await firstWave();
else if (flag('--runtimes')) {
  // The OTLP sink of the tracing case runs in this process: on the load core, off the servers'.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await runtimes();
} else if (flag('--topologies')) await topologies();
else if (flag('--tracing')) {
  // The OTLP sink runs in this process, standing in for a collector on another machine: on the
  // load core, off the server's.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await tracingCost();
} else if (flag('--webhooks')) {
  // This process receives the deliveries and paces the orders: keep it on the load core, off the server's.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await webhooks();
} else if (flag('--crowds')) {
  // The closed-loop clients run in this process, on the load core.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await crowds();
} else if (flag('--overload')) {
  // The open-loop generator and the probe run on the load core, off the server's.
  if (cores >= 2) execFileSync('taskset', ['-a', '-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  await overload();
} else await ratios();
process.exit(0);
