// docs/api-guide.md#rate-limits: quotas per caller and per anonymous address, the IETF RateLimit fields, 429
// problems; counters in the process (both engines) or in Redis shared by instances; fail open
// when Redis cannot answer. Windows are wall-clock minutes, so each sequence first moves clear
// of a minute boundary.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_HITS_PER_CALL, RedisStore } from '../../src/http/rate-limit/redis-store.js';
import { resolvedDocument } from '../support/openapi.js';
import { required } from '../support/required.js';
import { buildTestApp, engine } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';
import { aUserRequest } from '../support/factories.js';
import { clearOfMinuteBoundary } from '../support/until.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let sequence = 0;
const aCaller = () => bearer({ sub: `rl-${process.pid}-${Date.now()}-${sequence++}`, scope: 'orders:read' });
const anAddress = () => `10.9.${(sequence >> 8) & 255}.${sequence++ & 255}`;

const ratelimit = (headers: Record<string, unknown>) => ({
  policy: headers['ratelimit-policy'],
  value: headers.ratelimit,
});

describe('quotas in the process', async () => {
  const { app } = await buildTestApp({ RATE_LIMIT_PER_MINUTE: '3', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '2' });

  it('counts an authenticated caller by sub, with RateLimit fields, then answers 429 with Retry-After', async () => {
    await clearOfMinuteBoundary();
    const auth = await aCaller();
    const answers: Awaited<ReturnType<typeof app.inject>>[] = [];
    const clock: { before: number; after: number }[] = [];
    for (let i = 0; i < 4; i++) {
      const before = Date.now();
      answers.push(await app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: auth } }));
      clock.push({ before, after: Date.now() });
    }

    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 429]);
    const seconds = (a: { headers: Record<string, unknown> }) =>
      Number(/;t=(\d+)$/.exec(String(a.headers.ratelimit))![1]);
    const t = seconds(answers[0]!);
    expect(t).toBeGreaterThanOrEqual(1);
    expect(t).toBeLessThanOrEqual(60);
    // The window's end is fixed (the next wall-clock minute): each answer's seconds left are those
    // to that one end, as the clock read while its request ran, however long the four took on a
    // busy host.
    const end = (Math.floor(clock[0]!.before / 60_000) + 1) * 60_000;
    for (const [i, a] of answers.entries()) {
      expect(seconds(a)).toBeGreaterThanOrEqual(Math.ceil((end - clock[i]!.after) / 1000));
      expect(seconds(a)).toBeLessThanOrEqual(Math.ceil((end - clock[i]!.before) / 1000));
    }
    expect(answers.map((a) => ratelimit(a.headers))).toEqual(
      [0, 1, 2, 3].map((i) => ({
        policy: '"default";q=3;w=60',
        value: `"default";r=${Math.max(0, 2 - i)};t=${seconds(answers[i]!)}`,
      })),
    );
    const limited = answers[3]!;
    expect(limited.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(limited.headers['retry-after']).toBe(String(seconds(limited)));
    expect(limited.json()).toEqual({
      type: 'about:blank',
      title: 'Too Many Requests',
      status: 429,
      detail: `The quota of 3 requests per minute is used up. Retry after ${seconds(limited)} seconds.`,
      instance: '/api/v1/orders',
    });
  });

  it('gives every caller a quota of its own', async () => {
    await clearOfMinuteBoundary();
    const [a, b] = [await aCaller(), await aCaller()];
    for (let i = 0; i < 3; i++)
      await app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: a } });
    const other = await app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: b } });
    expect(other.statusCode).toBe(200);
    expect(other.headers.ratelimit).toMatch(/^"default";r=2;t=\d+$/);
  });

  it('counts anonymous requests by address: public paths and 401s, not health probes or preflights', async () => {
    await clearOfMinuteBoundary();
    const address = anAddress();
    const probes = await Promise.all(
      Array.from({ length: 5 }, () =>
        app.inject({ method: 'GET', url: '/api/public/health/live', remoteAddress: address }),
      ),
    );
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/v1/orders',
      remoteAddress: address,
      headers: { origin: 'https://x.example', 'access-control-request-method': 'GET' },
    });
    const publicPath = await app.inject({
      method: 'GET',
      url: '/api/public/problems/conflict',
      remoteAddress: address,
    });
    const unauthenticated = await app.inject({ method: 'GET', url: '/api/v1/orders', remoteAddress: address });
    const guessing = await app.inject({
      method: 'GET',
      url: '/api/v1/orders',
      remoteAddress: address,
      headers: { authorization: 'Bearer not.a.token' },
    });

    expect(probes.every((p) => p.statusCode === 200 && p.headers.ratelimit === undefined)).toBe(true);
    expect(preflight.headers.ratelimit).toBeUndefined();
    expect(publicPath.statusCode).toBe(200);
    expect(ratelimit(publicPath.headers)).toMatchObject({
      policy: '"default";q=2;w=60',
      value: expect.stringMatching(/^"default";r=1;/),
    });
    expect(unauthenticated.statusCode).toBe(401);
    expect(unauthenticated.headers.ratelimit).toMatch(/^"default";r=0;/);
    expect(guessing.statusCode).toBe(429);
    expect(guessing.json().title).toBe('Too Many Requests');
    // Another address is not affected.
    expect((await app.inject({ method: 'GET', url: '/api/v1/orders', remoteAddress: anAddress() })).statusCode).toBe(
      401,
    );
  });

  it('documents 429 and the RateLimit fields on every operation but the health probes', async () => {
    const document = await resolvedDocument<{
      paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>>;
    }>(app);
    const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.values(methods).map((op) => ({ path, op })),
    );
    const counted = operations.filter(({ path }) => !path.startsWith('/api/public/health/'));
    expect(counted.length).toBeGreaterThan(30);
    for (const { path, op } of counted) {
      expect(op.responses['429'], path).toBeDefined();
      expect(Object.keys(op.responses['429']!.headers ?? {}), path).toEqual(
        expect.arrayContaining(['Retry-After', 'RateLimit', 'RateLimit-Policy']),
      );
    }
    expect(
      operations
        .filter(({ path }) => path.startsWith('/api/public/health/'))
        .every(({ op }) => op.responses['429'] === undefined),
    ).toBe(true);
  });

  it('ignores X-Forwarded-For unless TRUST_PROXY is on', async () => {
    await clearOfMinuteBoundary();
    const address = anAddress();
    const first = await app.inject({
      method: 'GET',
      url: '/api/v1/orders',
      remoteAddress: address,
      headers: { 'x-forwarded-for': '203.0.113.1' },
    });
    const second = await app.inject({
      method: 'GET',
      url: '/api/v1/orders',
      remoteAddress: address,
      headers: { 'x-forwarded-for': '203.0.113.2' },
    });
    expect([first.headers.ratelimit, second.headers.ratelimit].map((v) => String(v).split(';')[1])).toEqual([
      'r=1',
      'r=0',
    ]);
  });
});

describe('quotas behind a proxy, and quotas turned off', async () => {
  const proxied = await buildTestApp({
    TRUST_PROXY: 'true',
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1',
  });

  it('takes the address from X-Forwarded-For behind TRUST_PROXY', async () => {
    await clearOfMinuteBoundary();
    const proxy = anAddress();
    const a = await proxied.app.inject({
      method: 'GET',
      url: '/api/v1/orders',
      remoteAddress: proxy,
      headers: { 'x-forwarded-for': `198.51.100.${sequence++ & 255}` },
    });
    const b = await proxied.app.inject({
      method: 'GET',
      url: '/api/v1/orders',
      remoteAddress: proxy,
      headers: { 'x-forwarded-for': `198.51.100.${sequence++ & 255}` },
    });
    expect([a.statusCode, b.statusCode]).toEqual([401, 401]);
    expect([a.headers.ratelimit, b.headers.ratelimit].map((v) => String(v).split(';')[1])).toEqual(['r=0', 'r=0']);
  });

  it('sends no RateLimit fields for a quota set to 0', async () => {
    const answer = await proxied.app.inject({
      method: 'GET',
      url: '/api/v1/orders',
      headers: { authorization: await aCaller() },
    });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers.ratelimit).toBeUndefined();
    expect(answer.headers['ratelimit-policy']).toBeUndefined();
  });
});

// ---- Redis ------------------------------------------------------------------------------------

const REDIS = 'redis://127.0.0.1:6379';

async function reachable(port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const redisUp = await reachable(6379);
let redisServer: string | undefined;
try {
  (await import('node:child_process')).execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
  redisServer = 'redis-server';
} catch {
  redisServer = undefined;
}
// The Redis tests do not depend on the database engine; they run once, in the embedded run.
const runRedis = engine === 'pglite';
if (runRedis) {
  required('test/http/rate-limit.test.ts (Redis)', redisUp ? undefined : 'nothing listens on 127.0.0.1:6379');
  required(
    'test/http/rate-limit.test.ts (a private redis-server)',
    redisServer === undefined ? 'no redis-server on PATH' : undefined,
  );
}

describe.runIf(runRedis && redisUp)('quotas in Redis, shared by instances', async () => {
  if (!(runRedis && redisUp)) return; // collected even when skipped: connect to nothing then
  const one = await buildTestApp({ REDIS_URL: REDIS, RATE_LIMIT_PER_MINUTE: '4' });
  const two = await buildTestApp({ REDIS_URL: REDIS, RATE_LIMIT_PER_MINUTE: '4' });

  it('enforces one quota across two instances', async () => {
    await clearOfMinuteBoundary();
    const auth = await aCaller();
    const answers = [];
    for (const app of [one.app, two.app, one.app, two.app, one.app, two.app])
      answers.push(await app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: auth } }));

    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200, 429, 429]);
    expect(answers.slice(0, 4).map((a) => String(a.headers.ratelimit).split(';')[1])).toEqual([
      'r=3',
      'r=2',
      'r=1',
      'r=0',
    ]);
  });

  it('counts every hit of concurrent requests, of one caller and of several, as requests one by one would', async () => {
    await clearOfMinuteBoundary();
    const [a, b] = [await aCaller(), await aCaller()];
    const get = (auth: string) =>
      one.app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: auth } });

    const answers = await Promise.all([get(a), get(b), get(a), get(a), get(b), get(a), get(a)]);
    const ofA = answers.filter((_, i) => [0, 2, 3, 5, 6].includes(i));
    const ofB = [answers[1], answers[4]];

    expect(ofA.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 200, 429]);
    expect(
      ofA
        .filter((r) => r.statusCode === 200)
        .map((r) => String(r.headers.ratelimit).split(';')[1])
        .sort(),
    ).toEqual(['r=0', 'r=1', 'r=2', 'r=3']);
    expect(ofB.map((r) => String(r.headers.ratelimit).split(';')[1]).sort()).toEqual(['r=2', 'r=3']);
  });
});

describe.runIf(runRedis && redisUp)('the Redis store under a burst', () => {
  it('sends the hits of one turn in calls of at most 1,000 keys, and answers each hit its own count', async () => {
    const store = new RedisStore(REDIS);
    const info = new Redis(REDIS);
    try {
      await store.connected(2000);
      const scriptCalls = async () => {
        const stats = await info.info('commandstats');
        return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
      };
      await store.hit('warm-up', Date.now()); // the script is loaded (EVAL once, then EVALSHA)
      const key = `burst-${randomUUID()}`;
      const before = await scriptCalls();

      const counts = await Promise.all(Array.from({ length: 2 * MAX_HITS_PER_CALL + 500 }, () => store.hit(key, 1)));

      expect(counts).toEqual(counts.map((_, i) => i + 1));
      expect((await scriptCalls()) - before).toBe(3);
    } finally {
      await store.close();
      info.disconnect();
    }
  });
});

describe.runIf(runRedis)('when Redis cannot answer', async () => {
  it('serves requests uncounted when nothing listens at REDIS_URL, warns once, counts the misses, and stays ready', async () => {
    const port = await freePort(); // closed: connections are refused at once
    const { app, logs } = await buildTestApp({ REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_PER_MINUTE: '1' });
    const auth = await aCaller();
    const answers = [];
    for (let i = 0; i < 4; i++)
      answers.push(await app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: auth } }));
    const ready = await app.inject({ method: 'GET', url: '/api/public/health/ready' });

    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
    expect(answers.every((a) => a.headers.ratelimit === undefined)).toBe(true);
    expect(logs.filter((l) => String(l.msg).startsWith('rate-limit store unavailable'))).toHaveLength(1);
    expect(await app.metrics.getSingleMetricAsString('rate_limit_store_errors_total')).toMatch(
      /rate_limit_store_errors_total 4$/m,
    );
    expect(ready.statusCode).toBe(200);
  });

  const runPrivate = runRedis && redisServer !== undefined;
  describe.runIf(runPrivate)('a private redis-server stopped under a running instance', async () => {
    // A skipped suite is still collected, and its afterAll never runs: start nothing then.
    if (!runPrivate) return;
    const port = await freePort();
    let server: ChildProcess | undefined = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    afterAll(() => server?.kill('SIGKILL'));
    for (let i = 0; i < 50 && !(await reachable(port)); i++) await sleep(100);
    const { app } = await buildTestApp({ REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_PER_MINUTE: '2' });

    it('limits while Redis is up, and fails open once it is gone', async () => {
      await clearOfMinuteBoundary();
      const auth = await aCaller();
      const get = () => app.inject({ method: 'GET', url: '/api/v1/orders', headers: { authorization: auth } });
      const up = [await get(), await get(), await get()];
      expect(up.map((a) => a.statusCode)).toEqual([200, 200, 429]);

      server!.kill('SIGKILL');
      await new Promise((r) => server!.once('exit', r));
      server = undefined;
      const down = [await get(), await get()];
      expect(down.map((a) => a.statusCode)).toEqual([200, 200]);
      expect(down.every((a) => a.headers.ratelimit === undefined)).toBe(true);
      expect(await app.metrics.getSingleMetricAsString('rate_limit_store_errors_total')).toMatch(
        /rate_limit_store_errors_total [2-9]$/m,
      );
      expect((await app.inject({ method: 'GET', url: '/api/public/health/ready' })).statusCode).toBe(200);
    });
  });
});

describe('the client address behind proxies (TRUST_PROXY)', async () => {
  const oneProxy = await buildTestApp({
    TRUST_PROXY: 'true',
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '5',
  });
  const twoHops = await buildTestApp({
    TRUST_PROXY: '2',
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '5',
  });
  const listed = await buildTestApp({
    TRUST_PROXY: '10.200.0.0/16,10.201.0.1',
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '5',
  });
  const statuses = async (
    target: Awaited<ReturnType<typeof buildTestApp>>,
    remoteAddress: string,
    forwardedFor: (i: number) => string,
    count = 9,
  ) => {
    const out: number[] = [];
    for (let i = 0; i < count; i++) {
      const answer = await target.app.inject({
        method: 'GET',
        url: '/api/v1/orders',
        remoteAddress,
        headers: { 'x-forwarded-for': forwardedFor(i) },
      });
      out.push(answer.statusCode);
    }
    return out;
  };
  const fiveThenLimited = [401, 401, 401, 401, 401, 429, 429, 429, 429];

  it('takes the rightmost entry behind one proxy: a new forged entry per request does not escape the quota', async () => {
    await clearOfMinuteBoundary();
    const client = anAddress();
    expect(await statuses(oneProxy, '10.0.0.1', (i) => `203.0.113.${i}, ${client}`)).toEqual(fiveThenLimited);
  });

  it('takes the n-th entry from the right behind n proxies', async () => {
    await clearOfMinuteBoundary();
    const client = anAddress();
    expect(await statuses(twoHops, '10.0.0.2', (i) => `203.0.113.${i}, ${client}, 10.0.0.1`)).toEqual(fiveThenLimited);
  });

  it('skips the listed proxies from the right, and takes an unlisted peer as it arrives', async () => {
    await clearOfMinuteBoundary();
    const client = anAddress();
    expect(await statuses(listed, '10.200.3.4', (i) => `203.0.113.${i}, ${client}, 10.201.0.1`)).toEqual(
      fiveThenLimited,
    );
    // A peer that is not a listed proxy is the client, whatever X-Forwarded-For it sends.
    const direct = anAddress();
    expect(await statuses(listed, direct, (i) => `203.0.113.${i}`, 6)).toEqual(fiveThenLimited.slice(0, 6));
  });

  it('builds Location from X-Forwarded-* only for a listed proxy', async () => {
    const post = (remoteAddress: string) =>
      listed.app.inject({
        method: 'POST',
        url: '/api/v1/users',
        remoteAddress,
        headers: {
          authorization: ADMIN,
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'api.example.com',
        },
        payload: aUserRequest(),
      });
    expect((await post('10.200.0.7')).headers.location).toMatch(/^https:\/\/api\.example\.com\/api\/v1\/users\/\d+$/);
    expect((await post('198.51.100.77')).headers.location).toMatch(/^http:\/\/localhost(:80)?\/api\/v1\/users\/\d+$/);
  });
});
