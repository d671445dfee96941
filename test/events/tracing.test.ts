// OpenTelemetry tracing (docs/tracing.md), exported over OTLP/HTTP with JSON encoding to a
// collector on 127.0.0.1 that this file runs: the span tree of a read and of an order (the
// SERVER span, a CLIENT span per statement beneath it), a caller's trace continued, a 404 that
// is not an error, the webhook delivery as a span of the order's trace that sends `traceparent`
// on, and log lines that carry the trace's ids. Both engines; a real process for the log lines.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, type Tracing } from '../../src/tracing/tracing.js';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder } from '../support/factories.js';
import { runServer } from '../support/process.js';
import { buildTestApp, engine } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';
import { until } from '../support/until.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: OtlpValue }[];
  status?: { code?: number; message?: string };
  links?: { traceId: string; spanId: string }[];
}
interface Exported {
  resource: Record<string, unknown>;
  span: OtlpSpan;
  attributes: Record<string, unknown>;
}
const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

const valueOf = (v: OtlpValue): unknown =>
  v.stringValue ?? (v.intValue === undefined ? v.boolValue : Number(v.intValue));
const attributesOf = (list: { key: string; value: OtlpValue }[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** An OTLP/HTTP collector (JSON encoding): every span it receives. */
function collector() {
  const spans: Exported[] = [];
  const requests: { path: string; contentType: string | undefined }[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', contentType: req.headers['content-type'] });
      const payload = JSON.parse(body) as {
        resourceSpans: {
          resource: { attributes: { key: string; value: OtlpValue }[] };
          scopeSpans: { spans: OtlpSpan[] }[];
        }[];
      };
      for (const rs of payload.resourceSpans) {
        const resource = attributesOf(rs.resource.attributes);
        for (const ss of rs.scopeSpans)
          for (const span of ss.spans) spans.push({ resource, span, attributes: attributesOf(span.attributes) });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { server, spans, requests };
}

const otlp = collector();
await new Promise<void>((resolve) => otlp.server.listen(0, '127.0.0.1', resolve));
const otlpUrl = `http://127.0.0.1:${(otlp.server.address() as AddressInfo).port}`;

// The standard variables, as an operator sets them; the SDK reads them from the environment.
process.env.OTEL_EXPORTER_OTLP_ENDPOINT = otlpUrl;
process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
process.env.OTEL_RESOURCE_ATTRIBUTES = 'deployment.environment.name=test';
const tracing = startTracing(process.env, '0.1.0') as Tracing;

// A webhook receiver: records each delivery's headers.
const deliveries: { headers: IncomingMessage['headers']; body: string }[] = [];
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    deliveries.push({ headers: req.headers, body });
    res.writeHead(204).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

afterAll(async () => {
  await tracing.shutdown();
  for (const server of [otlp.server, receiver]) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const { app, logs } = await buildTestApp(
  { WEBHOOK_DISPATCHER: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '50' },
  {
    // A route that fails as a bug would: the 500 its span must mark as an error.
    plugins: [
      async (instance) => {
        instance.get('/test/boom', { config: { scope: 'users:read' } }, async () => {
          throw new Error('boom');
        });
      },
    ],
  },
);
const api = asAdmin(app);

/**
 * The SERVER span of the request answered with `requestId` (its X-Request-Id), once exported;
 * `from`: the log lines of the app that answered it.
 */
async function serverSpanOf(requestId: string, from = logs): Promise<Exported> {
  const line = await until('the access line', () =>
    from.find((l) => l.requestId === requestId && l.msg === 'request completed'),
  );
  return until('the exported span', async () => {
    await tracing.flush();
    return otlp.spans.find((s) => s.span.kind === SERVER && s.span.spanId === line.span_id);
  });
}
const childrenOf = (parent: Exported) => otlp.spans.filter((s) => s.span.parentSpanId === parent.span.spanId);

describe('a read', () => {
  it('is a SERVER span named by its route, with a CLIENT span for its statement beneath it', async () => {
    const user = await createUser(app);
    const read = await api({ method: 'GET', url: `/api/v1/users/${user.id}?fields=ignored` });
    expect(read.statusCode).toBe(200);
    const server = await serverSpanOf(String(read.headers['x-request-id']));
    expect(server.span.name).toBe('GET /api/v1/users/:id');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/api/v1/users/:id',
      'url.path': `/api/v1/users/${user.id}`,
      'url.scheme': 'http',
      'http.response.status_code': 200,
    });
    expect(server.span.parentSpanId ?? '').toBe(''); // a root: no traceparent came in
    expect(server.span.status?.code ?? 0).not.toBe(ERROR);
    expect(server.resource).toMatchObject({
      'service.name': 'resource-api',
      'service.version': '0.1.0',
      'deployment.environment.name': 'test',
    });
    const statements = childrenOf(server);
    expect(statements.length).toBeGreaterThanOrEqual(1);
    for (const s of statements) {
      expect(s.span.kind).toBe(CLIENT);
      expect(s.attributes['db.system']).toBe('postgresql');
      // The operation only: no statement text, no parameter value.
      expect(Object.keys(s.attributes).sort()).toEqual(['db.operation.name', 'db.system', 'db.system.name']);
    }
    expect(statements.map((s) => s.attributes['db.operation.name'])).toContain('SELECT');
  });

  it('continues the trace of a traceparent that comes in, and keeps its tracestate', async () => {
    const user = await createUser(app);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const read = await api({
      method: 'GET',
      url: `/api/v1/users/${user.id}`,
      headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'vendor=abc' },
    });
    const server = await serverSpanOf(String(read.headers['x-request-id']));
    expect(server.span.traceId).toBe(traceId);
    expect(server.span.parentSpanId).toBe('00f067aa0ba902b7');
  });

  it('carries no query string in any attribute: a credential in the URL stays out of the trace', async () => {
    const user = await createUser(app);
    const read = await api({ method: 'GET', url: `/api/v1/users/${user.id}?token=secret123&page=1` });

    const server = await serverSpanOf(String(read.headers['x-request-id']));

    expect(server.attributes['url.path']).toBe(`/api/v1/users/${user.id}`);
    expect(server.attributes).not.toHaveProperty('url.query');
    expect(server.attributes).not.toHaveProperty('url.full');
    expect(JSON.stringify(server)).not.toContain('secret123');
    expect(logs.filter((l) => JSON.stringify(l).includes('secret123'))).toEqual([]);
  });

  it('is not an error when it is a 404; a 5xx is', async () => {
    const missing = await api({ method: 'GET', url: '/api/v1/users/987654321' });
    expect(missing.statusCode).toBe(404);
    const server = await serverSpanOf(String(missing.headers['x-request-id']));
    expect(server.attributes['http.response.status_code']).toBe(404);
    expect(server.span.status?.code ?? 0).not.toBe(ERROR);

    const failed = await api({ method: 'GET', url: '/test/boom' });
    expect(failed.statusCode).toBe(500);
    const broken = await serverSpanOf(String(failed.headers['x-request-id']));
    expect(broken.span.status?.code).toBe(ERROR);
    expect(broken.attributes).toMatchObject({ 'http.response.status_code': 500, 'error.type': '500' });
  });

  it('answers CORS preflights that ask to send traceparent and tracestate', async () => {
    const traced = await buildTestApp({ CORS_ALLOWED_ORIGINS: 'https://app.example.com' });
    const preflight = await traced.app.inject({
      method: 'OPTIONS',
      url: '/api/v1/users/1',
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'traceparent, tracestate, authorization',
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(String(preflight.headers['access-control-allow-headers'])).toMatch(/traceparent, tracestate/);
  });
});

describe('an order', () => {
  let orderTrace: { server: Exported; orderId: number };
  beforeAll(async () => {
    const subscribed = await api({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      payload: { url: receiverUrl, events: ['order.created'] },
    });
    expect(subscribed.statusCode).toBe(201);
    const product = await createProduct(app, { price: 3 }, 10);
    const customer = await aCustomer(app);
    const placed = await placeOrder(app, customer.auth, product.id, 2);
    expect(placed.statusCode, placed.body).toBe(201);
    orderTrace = {
      server: await serverSpanOf(String(placed.headers['x-request-id'])),
      orderId: placed.json<{ id: number }>().id,
    };
  });

  it('is a SERVER span with its statements beneath it', () => {
    const { server } = orderTrace;
    expect(server.span.name).toBe('POST /api/v1/orders');
    expect(server.attributes['http.response.status_code']).toBe(201);
    const operations = childrenOf(server).map((s) => s.attributes['db.operation.name']);
    expect(operations).toContain('WITH'); // placing the order: one statement
  });

  it('sent with an Idempotency-Key, has its transaction beneath it: BEGIN, its statements, COMMIT', async () => {
    const product = await createProduct(app, { price: 4 }, 10);
    const customer = await aCustomer(app);
    const placed = await app.inject({
      method: 'POST',
      url: '/api/v1/orders',
      headers: { authorization: customer.auth, 'idempotency-key': `traced-${String(Date.now())}` },
      payload: { productId: product.id, quantity: 1 },
    });
    expect(placed.statusCode, placed.body).toBe(201);
    const server = await serverSpanOf(String(placed.headers['x-request-id']));
    const operations = childrenOf(server).map((s) => s.attributes['db.operation.name']);
    // Its own transaction, once: one BEGIN, one placing statement, one COMMIT, none of another request's.
    for (const operation of ['BEGIN', 'WITH', 'COMMIT'])
      expect(
        operations.filter((o) => o === operation),
        operation,
      ).toHaveLength(1);
  });

  it('keeps concurrent requests apart: each statement is beneath its own request', async () => {
    const users = await Promise.all([1, 2, 3, 4, 5, 6].map(() => createUser(app)));
    // What one read runs, alone: the count each of the concurrent ones must have, no more, no less.
    const alone = await api({ method: 'GET', url: `/api/v1/users/${users[0]!.id}` });
    const own = childrenOf(await serverSpanOf(String(alone.headers['x-request-id']))).length;
    expect(own).toBeGreaterThanOrEqual(1);
    const reads = await Promise.all(users.map((u) => api({ method: 'GET', url: `/api/v1/users/${u.id}` })));
    const servers = await Promise.all(reads.map((r) => serverSpanOf(String(r.headers['x-request-id']))));
    for (const server of servers) {
      const statements = childrenOf(server);
      expect(statements).toHaveLength(own);
    }
    expect(new Set(servers.map((s) => s.span.traceId)).size).toBe(servers.length);
  });

  it('gives a gathered statement one CLIENT span, beneath one request it served and linked from the others', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => createUser(app)));
    const reads = await Promise.all(
      Array.from({ length: 24 }, (_, i) => api({ method: 'GET', url: `/api/v1/users/${users[i % 8]!.id}` })),
    );
    for (const read of reads) expect(read.statusCode, read.body).toBe(200);
    const servers = await Promise.all(reads.map((r) => serverSpanOf(String(r.headers['x-request-id']))));
    const ofRequest = new Map(servers.map((server) => [server.span.spanId, server]));
    const children = servers.flatMap((server) => childrenOf(server));
    const statements = children.filter((s) => s.span.name === 'SELECT');
    const waits = children.filter((s) => s.span.name === 'gathered read');
    // Every request has exactly one: its statement, or its wait for another's.
    expect(statements.length + waits.length).toBe(servers.length);
    for (const statement of statements) expect(statement.span.kind).toBe(CLIENT);
    if (engine !== 'postgres') {
      // PGlite reads are not gathered: each request has its own statement.
      expect(waits).toEqual([]);
      return;
    }
    const gathered = statements.filter((s) => s.attributes['db.operation.batch.size'] !== undefined);
    expect(gathered.length).toBeGreaterThan(0);
    for (const wait of waits) {
      expect(wait.span.kind).toBe(1); // INTERNAL
      expect(wait.span.links).toHaveLength(1);
      const linked = gathered.find((s) => s.span.spanId === wait.span.links![0]!.spanId);
      expect(linked, 'the statement it links to').toBeDefined();
      expect(wait.span.links![0]!.traceId).toBe(linked!.span.traceId);
      expect(wait.span.parentSpanId).not.toBe(linked!.span.parentSpanId);
    }
    for (const statement of gathered) {
      // Beneath one of the requests it carried; linked from each other one (all sampled here).
      expect(ofRequest.has(statement.span.parentSpanId ?? '')).toBe(true);
      const linking = waits.filter((wait) => wait.span.links![0]!.spanId === statement.span.spanId);
      expect(statement.attributes['db.operation.batch.size']).toBe(linking.length + 1);
    }
  });

  it('reaches the receiver in the same trace: the delivery is a CLIENT span of it, and sends traceparent on', async () => {
    const { server, orderId } = orderTrace;
    const delivery = await until('the delivery', () =>
      deliveries.find((d) => d.body.includes(`"subject":"orders/${String(orderId)}"`)),
    );
    const traceparent = String(delivery.headers.traceparent);
    const [, traceId, parentId] = traceparent.split('-');
    expect(traceId).toBe(server.span.traceId);
    const attempt = await until('the delivery span', async () => {
      await tracing.flush();
      return otlp.spans.find((s) => s.span.spanId === parentId);
    });
    expect(attempt.span.kind).toBe(CLIENT);
    expect(attempt.span.name).toBe('POST');
    expect(attempt.span.parentSpanId).toBe(server.span.spanId);
    expect(attempt.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 204,
      'cloudevents.event_type': 'order.created',
      'cloudevents.event_subject': `orders/${String(orderId)}`,
      'url.full': receiverUrl,
    });
  });
});

describe("a sampled request's database handle", async () => {
  // A sampled request's handle names its span for as long as anything the request started runs:
  // one answered by the time-out while its handler still runs keeps it, whatever other requests
  // come and go meanwhile (handles kept for reuse would have to wait for the handler, not the
  // response: docs/benchmark-log.md, "Tracing", run 33).
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const slow = await buildTestApp(
    { REQUEST_TIMEOUT_MS: '1000' }, // the reads below must not reach it on a loaded host
    {
      plugins: [
        async (instance) => {
          instance.get('/test/late-statement', { config: { scope: 'users:read' } }, async (request) => {
            const db = request.db;
            await gate; // answered 503 by the time-out meanwhile
            await sql`select 1 as late`.execute(db);
            return { done: true };
          });
        },
      ],
    },
  );
  afterAll(() => slow.app.close());
  const slowApi = asAdmin(slow.app);
  const spanOf = (requestId: string) => serverSpanOf(requestId, slow.logs);

  it("stays with a request the time-out answered: its late statement is beneath it, not another's", async () => {
    const user = await createUser(slow.app);
    const late = await slowApi({ method: 'GET', url: '/test/late-statement' });
    expect(late.statusCode).toBe(503);
    const lateSpan = await spanOf(String(late.headers['x-request-id']));
    // Reads come and go meanwhile, each with a handle of its own; two are in flight when the
    // late statement is sent.
    const reads = [];
    for (let i = 0; i < 4; i++) reads.push(await slowApi({ method: 'GET', url: `/api/v1/users/${user.id}` }));
    const during = Promise.all([1, 2].map(() => slowApi({ method: 'GET', url: `/api/v1/users/${user.id}` })));
    open();
    reads.push(...(await during));
    expect(reads.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    const lateStatement = await until("the late statement's span", async () => {
      await tracing.flush();
      return otlp.spans.find((s) => s.span.parentSpanId === lateSpan.span.spanId && s.span.kind === CLIENT);
    });
    expect(lateStatement.attributes['db.operation.name']).toBe('SELECT');
    // Every read has its own statements beneath it, as many as the first, none of the late one's.
    const servers = await Promise.all(reads.map((r) => spanOf(String(r.headers['x-request-id']))));
    const counts = servers.map((server) => childrenOf(server).length);
    expect(counts[0]).toBeGreaterThanOrEqual(1);
    expect(counts).toEqual(counts.map(() => counts[0]));
  });
});

describe('log lines', () => {
  it('of a request carry its trace_id and span_id, the access line included', async () => {
    const read = await api({ method: 'GET', url: '/api/v1/users/987654' });
    const server = await serverSpanOf(String(read.headers['x-request-id']));
    const line = logs.find((l) => l.requestId === read.headers['x-request-id'] && l.msg === 'request completed');
    expect(line).toMatchObject({ trace_id: server.span.traceId, span_id: server.span.spanId });
  });

  it.runIf(engine === 'pglite')(
    'written by the service process while it serves a request carry them too (the request’s logger), and its spans go out',
    async () => {
      const started = runServer({
        NODE_ENV: 'development',
        DATABASE_URL: 'memory://',
        LOG_FORMAT: 'json',
        OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'resource-api-process',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      });
      const service = await started.ready;
      const created = await fetch(`${service.url}/api/v1/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: ADMIN },
        body: JSON.stringify({
          name: 'Traced',
          email: `traced-${String(Date.now())}@example.com`,
          password: 'secret-password-1',
        }),
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: number };
      const reset = await fetch(`${service.url}/api/v1/users/${String(id)}/password-resets`, {
        method: 'POST',
        headers: { authorization: ADMIN },
      });
      expect(reset.status).toBe(202);
      // Development prints the mail to the log, from inside the request.
      const mail = await until('the printed mail', () =>
        service.logs.find((l) => typeof l.msg === 'string' && l.msg.includes('/api/public/password-reset#token=')),
      );
      expect(mail.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect((await service.stop()).code).toBe(0);
      const server = await until('the exported span', () =>
        otlp.spans.find(
          (s) =>
            s.resource['service.name'] === 'resource-api-process' &&
            s.span.name === 'POST /api/v1/users/:id/password-resets',
        ),
      );
      expect(mail.trace_id).toBe(server.span.traceId);
      expect(otlp.requests.every((r) => r.path === '/v1/traces' && r.contentType === 'application/json')).toBe(true);
    },
  );
});
