// wrk, the closed-loop load of the bench: installing it, its Lua scripts, and one measured run
// with the server's (and PostgreSQL's) CPU per request.
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from './common.js';
import { CONNECTIONS, ORIGIN, PRODUCTS, TOKEN, USERS, work } from './options.js';
import { LOAD_CORE, TICK_US, cpuTicks, pin, postgresDelta, postgresTicks } from './proc.js';

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
  /** 2xx/3xx answers a second (every answer a second with `refusals`). */
  rps: number;
  p50: number;
  p99: number;
  /** CPU µs of the server per 2xx/3xx answer (per answer with `refusals`). */
  serverUs: number;
  postgresUs: number;
  /** Of postgresUs, in PostgreSQL's own processes (WAL writer, autovacuum, checkpointer…), not in backends. */
  postgresBackgroundUs: number;
  postgresByKind: Record<string, number>;
  requests: number;
  /** Answers other than 2xx/3xx (a 503 the service shed, say) and socket errors: counted against it. */
  failed: number;
}

/**
 * `seconds` of wrk's closed loop against `server`. An answer other than 2xx/3xx (a 503 the
 * service shed) or a socket error is counted against the server, never left out: its req/s and
 * µs per request are those of the 2xx/3xx answers, and the failures are reported with them. With
 * `refusals` (a server measured while it refuses everything: its 503s are the point), every
 * answer counts.
 */
export function wrk(
  server: Server,
  lua: string,
  seconds: number,
  connections = CONNECTIONS,
  { refusals = false } = {},
): Promise<Measurement> {
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
    // 'close', not 'exit': a child may exit before its stdout has been read to the end.
    child.on('close', (code) => {
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
      const failed = refusals ? r.errors : r.errors + r.status;
      if (failed > 0)
        console.log(
          `  ${server.name}: ${failed} of ${r.requests} answers not 2xx/3xx or lost (${r.status} statuses, ${r.errors} socket errors): counted against it`,
        );
      const counted = Math.max(1, refusals ? r.requests : r.requests - r.status);
      const byKind = postgresDelta(before.pg, postgresTicks());
      const pgTicks = [...byKind.values()].reduce((a, b) => a + b, 0);
      const serverTicks = cpuTicks(server.pid) - before.server;
      resolve({
        rps: counted / (r.us / 1e6),
        p50: r.p50 / 1000,
        p99: r.p99 / 1000,
        serverUs: (serverTicks * TICK_US) / counted,
        postgresUs: (pgTicks * TICK_US) / counted,
        postgresBackgroundUs: ((pgTicks - (byKind.get('backend') ?? 0)) * TICK_US) / counted,
        postgresByKind: Object.fromEntries([...byKind].map(([k, t]) => [k, (t * TICK_US) / counted])),
        requests: r.requests,
        failed,
      });
    });
  });
}
