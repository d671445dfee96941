// Failover to a promoted standby (docs/operations.md "Running at scale"): a primary and a
// synchronous standby of the machine's PostgreSQL, each a throwaway cluster on a loopback port;
// the service, a real process, names both hosts in DATABASE_URL. Orders are placed and read
// without pause while the primary is killed (every process at once, as a crash) and the standby
// promoted: every answer is a 2xx or a 503 problem with Retry-After, none takes longer than the
// request time-out, writes succeed again within 5 s of the promotion without a restart,
// readiness follows, and no acknowledged order is lost.
import { createServer, type Server } from 'node:http';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createReplicatedPostgres,
  privatePostgresUnavailable,
  type ReplicatedPostgres,
} from '../support/private-postgres.js';
import { runServer, type ServerProcess } from '../support/process.js';
import { required } from '../support/required.js';
import { engine, testPostgres } from '../support/test-app.js';
import { openSse } from '../support/sse.js';
import { ADMIN, bearer } from '../support/tokens.js';
import { until } from '../support/until.js';

const REQUEST_TIMEOUT_MS = 5000;

interface Answer {
  at: number;
  path: string;
  status: number;
  ms: number;
  retryAfter: string | null;
  type: string | null;
  body: string;
}

// Once per CI run: on the PostgreSQL pass without a pooler (the clusters are the test's own).
const run =
  engine === 'postgres' &&
  testPostgres.pooler === 'none' &&
  required('test/processes/failover.test.ts', privatePostgresUnavailable);
describe.runIf(run)('failover to a promoted standby', () => {
  let pair: ReplicatedPostgres | undefined;
  let server: ServerProcess | undefined;
  // A webhook receiver on loopback: the order ids of the order.created events it was sent.
  const delivered = new Set<number>();
  let receiver: Server | undefined;

  beforeAll(async () => {
    const hooks = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const event = JSON.parse(body) as { type: string; data: { id: number } };
        if (event.type === 'order.created') delivered.add(event.data.id);
        response.writeHead(204).end();
      });
    });
    receiver = hooks;
    await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
    const replicated = await createReplicatedPostgres();
    pair = replicated;
    await replicated.synchronous();
    server = await runServer({
      DATABASE_URL: replicated.url,
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      DATABASE_POOL_SIZE: '4',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,1s,1s',
    }).ready;
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    receiver?.close();
    pair?.destroy();
  });

  it('answers 2xx or 503 throughout, writes again within 5 s of the promotion, and loses no acknowledged order', async () => {
    if (pair === undefined || server === undefined || receiver === undefined) throw new Error('not set up');
    const { url: serviceUrl } = server;
    const cluster = pair;
    const call = async (method: string, path: string, auth: string, body?: unknown): Promise<Answer> => {
      const started = performance.now();
      const response = await fetch(`${serviceUrl}${path}`, {
        method,
        headers: {
          ...(auth === '' ? {} : { authorization: auth }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS * 3),
      });
      return {
        at: started,
        path,
        status: response.status,
        ms: performance.now() - started,
        retryAfter: response.headers.get('retry-after'),
        type: response.headers.get('content-type'),
        body: await response.text(),
      };
    };

    const product = JSON.parse(
      (await call('POST', '/api/products', ADMIN, { sku: 'FAILOVER-1', name: 'Failover', price: 1 })).body,
    ) as { id: number };
    expect((await call('PUT', `/api/stock/${product.id}`, ADMIN, { available: 1_000_000 })).status).toBe(200);
    const user = JSON.parse(
      (
        await call('POST', '/api/v1/users', ADMIN, {
          name: 'Failover',
          email: 'failover@example.com',
          password: 'correct horse battery',
        })
      ).body,
    ) as { id: number };
    const customer = await bearer({ sub: String(user.id), scope: 'orders:read orders:write' });
    const { port } = receiver.address() as { port: number };
    const webhooks = await bearer({ sub: '0', scope: 'admin webhooks:read webhooks:write' });
    const subscription = await call('POST', '/api/v1/webhook-subscriptions', webhooks, {
      url: `http://127.0.0.1:${port}/hook`,
      events: ['order.created'],
    });
    expect(subscription.status, subscription.body).toBe(201);
    // A stream opened before the crash, still open after it.
    const stream = await openSse(`${serviceUrl}/api/v1/events?types=order.created`, { authorization: customer });
    expect(stream.status).toBe(200);

    const answers: Answer[] = [];
    const acknowledged: number[] = [];
    let running = true;
    const writer = async () => {
      while (running) {
        const answer = await call('POST', '/api/v1/orders', customer, { productId: product.id, quantity: 1 });
        answers.push(answer);
        if (answer.status === 201) acknowledged.push((JSON.parse(answer.body) as { id: number }).id);
        else await new Promise((r) => setTimeout(r, 20));
      }
    };
    const reader = async () => {
      while (running) {
        const last = acknowledged.at(-1);
        for (const path of [
          last === undefined ? '/api/v1/orders' : `/api/v1/orders/${last}`,
          `/api/stock/${product.id}`,
        ]) {
          answers.push(await call('GET', path, path.includes('stock') ? ADMIN : customer));
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    // A load balancer's probe, every 200 ms.
    const prober = async () => {
      while (running) {
        answers.push(await call('GET', '/api/public/health/ready', ''));
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const load = Promise.all([...Array.from({ length: 6 }, writer), reader(), reader(), prober()]);

    await new Promise((r) => setTimeout(r, 1500));
    const before = acknowledged.length;
    const crashedAt = performance.now();
    cluster.primary.crash();
    // Three seconds without a primary: requests wait for one or get 503, readiness says 503.
    await new Promise((r) => setTimeout(r, 3000));
    cluster.promote();
    const promotedAt = performance.now();
    await new Promise((r) => setTimeout(r, 8000));
    running = false;
    await load;

    // Every answer meanwhile: a 2xx, or a 503 problem with Retry-After; none past the time-out.
    const unexpected = answers.filter(
      (a) => !(a.status >= 200 && a.status < 300) && !(a.status === 503 && a.retryAfter !== null),
    );
    expect(unexpected.map((a) => `${a.status} ${a.path} ${a.body.slice(0, 200)}`)).toEqual([]);
    for (const a of answers.filter((x) => x.status === 503)) expect(a.type).toMatch(/^application\/problem\+json/);
    // (The time-out's own answer leaves at REQUEST_TIMEOUT_MS; on a loaded CI host it has
    // reached the client up to a second later: 6,000.45 ms once.)
    expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(REQUEST_TIMEOUT_MS + 2000);

    // Writes came back on the promoted standby, without a restart, within 5 s of the promotion.
    expect(before).toBeGreaterThan(0);
    const firstWrite = answers.find((a) => a.at > crashedAt && a.path === '/api/v1/orders' && a.status === 201);
    expect(firstWrite, 'no order was placed after the crash').toBeDefined();
    expect(firstWrite!.at + firstWrite!.ms - promotedAt).toBeLessThan(5000);
    // Readiness followed: 503 while there was no primary, 200 again after.
    const ready = answers.filter((a) => a.path === '/api/public/health/ready');
    expect(ready.some((a) => a.at > crashedAt && a.at < promotedAt && a.status === 503)).toBe(true);
    // (Readiness trusts the service's own answers of the last second: a probe behind the
    // writers' statements on a loaded host would otherwise miss its 2-s deadline.)
    const probes = ready
      .filter((a) => a.at > crashedAt)
      .map((a) => `${Math.round(a.at - promotedAt)} ms: ${a.status} in ${Math.round(a.ms)} ms`);
    expect(
      ready.some((a) => a.at > promotedAt && a.status === 200),
      probes.join('\n'),
    ).toBe(true);
    // Reads came back too, on every connection of the pool (one stuck on the dead primary
    // would time out the reads sent to it).
    const lateReads = answers.filter(
      (a) => a.at > promotedAt + 5000 && a.path !== '/api/public/health/ready' && a.path !== '/api/v1/orders',
    );
    expect(lateReads.length).toBeGreaterThan(0);
    expect(
      lateReads.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.path} ${a.body.slice(0, 120)}`),
    ).toEqual([]);

    // No acknowledged order is lost: each is on the new primary.
    const sql = postgres(cluster.standby.url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ id: number }[]>`select id::int as id from orders where id = any(${acknowledged})`;
      expect(rows.length).toBe(new Set(acknowledged).size);
    } finally {
      await sql.end();
    }
    expect(acknowledged.length).toBeGreaterThan(before);

    // The dispatcher and the event stream carry on, on the new primary.
    const after = await call('POST', '/api/v1/orders', customer, { productId: product.id, quantity: 1 });
    expect(after.status).toBe(201);
    const afterId = (JSON.parse(after.body) as { id: number }).id;
    await until('the delivery of the order placed after the promotion', () => delivered.has(afterId), 10_000);
    await stream.until(
      (messages) => messages.some((m) => (JSON.parse(m.data) as { data: { id: number } }).data.id === afterId),
      10_000,
    );
    stream.close();
  }, 120_000);
});
