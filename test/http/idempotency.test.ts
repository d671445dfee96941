// docs/api-guide.md#safe-retries: Idempotency-Key on every POST and PATCH. A retry replays the stored answer byte for
// byte and changes nothing; another request under the key is 422; a retry racing the first is
// 409; the stored answer commits with the write or not at all. Both engines.
import { createHash, randomUUID } from 'node:crypto';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import {
  aCustomer,
  aProductRequest,
  asAdmin,
  aUserRequest,
  createProduct,
  placeOrder,
  stockOf,
} from '../support/factories.js';
import { resolvedDocument } from '../support/openapi.js';
import { buildTestApp, engine } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';

const { app, config } = await buildTestApp();
const api = asAdmin(app);

const newKey = () => `"${randomUUID()}"`;
const keyed = (key: string, options: InjectOptions) =>
  api({ ...options, headers: { ...options.headers, 'idempotency-key': key } });

/** What a replay must repeat exactly (docs/api-guide.md#safe-retries). */
function stored(r: LightMyRequestResponse) {
  return {
    status: r.statusCode,
    body: r.body,
    location: r.headers.location,
    etag: r.headers.etag,
    contentType: r.headers['content-type'],
  };
}

async function countRows(table: 'orders' | 'users' | 'products' | 'idempotency_keys', target: FastifyInstance = app) {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)}`.execute(target.db);
  return rows[0]!.n;
}

async function anOrder(quantity = 1) {
  const product = await createProduct(app, { price: 2.5 }, 10);
  const customer = await aCustomer(app);
  const created = await api({
    method: 'POST',
    url: '/api/v1/orders',
    headers: { authorization: customer.auth },
    payload: { productId: product.id, quantity },
  });
  expect(created.statusCode, created.body).toBe(201);
  return { product, order: created.json<{ id: number }>() };
}

describe('a retry with the same key and body', () => {
  // Every kind of keyed route: a request that changes state, and how to see that it did once.
  const cases: { name: string; request: () => Promise<InjectOptions & { url: string }>; status: number }[] = [
    {
      name: 'POST /api/v1/users',
      status: 201,
      request: async () => ({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() }),
    },
    {
      name: 'POST /api/v2/users',
      status: 201,
      request: async () => ({
        method: 'POST',
        url: '/api/v2/users',
        payload: { ...aUserRequest(), age: 30, address: { street: 'Main Street 1', postalCode: '10115' } },
      }),
    },
    {
      name: 'PATCH /api/v1/users/{id}',
      status: 200,
      request: async () => {
        const user = (await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() })).json<{
          id: number;
        }>();
        return { method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'Renamed' } };
      },
    },
    {
      name: 'POST /api/v2/orders',
      status: 201,
      request: async () => {
        const product = await createProduct(app, {}, 5);
        const customer = (await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() })).json<{
          id: number;
        }>();
        return {
          method: 'POST',
          url: '/api/v2/orders',
          payload: { customerId: customer.id, items: [{ productId: product.id, quantity: 2 }] },
        };
      },
    },
    {
      name: 'PATCH /api/v1/orders/{id}',
      status: 200,
      request: async () => {
        const { order } = await anOrder();
        return { method: 'PATCH', url: `/api/v1/orders/${order.id}`, payload: { note: 'Leave at the door' } };
      },
    },
    {
      name: 'POST /api/v1/orders/{id}/confirmation',
      status: 200,
      request: async () => ({ method: 'POST', url: `/api/v1/orders/${(await anOrder()).order.id}/confirmation` }),
    },
    {
      name: 'POST /api/v2/orders/{id}/cancellation',
      status: 200,
      request: async () => ({
        method: 'POST',
        url: `/api/v2/orders/${(await anOrder()).order.id}/cancellation`,
        payload: { reason: 'changed my mind' },
      }),
    },
    {
      name: 'POST /api/products',
      status: 201,
      request: async () => ({ method: 'POST', url: '/api/products', payload: aProductRequest() }),
    },
  ];

  it.each(cases)('$name: the stored answer, byte for byte, and nothing done twice', async ({ request, status }) => {
    const options = await request();
    const key = newKey();
    const before = {
      users: await countRows('users'),
      orders: await countRows('orders'),
      products: await countRows('products'),
    };

    const first = await keyed(key, options);
    const afterFirst = {
      users: await countRows('users'),
      orders: await countRows('orders'),
      products: await countRows('products'),
    };
    const retries = [await keyed(key, options), await keyed(key, options)];
    const afterRetries = {
      users: await countRows('users'),
      orders: await countRows('orders'),
      products: await countRows('products'),
    };

    expect(first.statusCode, first.body).toBe(status);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.headers.etag).toBeDefined();
    for (const retry of retries) {
      expect(stored(retry)).toEqual(stored(first));
      expect(retry.headers['idempotent-replayed']).toBe('true');
    }
    expect(afterRetries).toEqual(afterFirst);
    if (status === 201)
      expect(Object.values(afterFirst).reduce((a, b) => a + b)).toBe(Object.values(before).reduce((a, b) => a + b) + 1);
    if (options.method === 'PATCH' || options.url.endsWith('ion')) {
      // The resource's version moved once: its ETag is still the one the first answer gave.
      const now = await api({ method: 'GET', url: options.url.replace(/\/(confirmation|cancellation)$/, '') });
      expect(now.headers.etag).toBe(first.headers.etag);
    }
  });

  it('reserves stock once for a retried order (v1), and the key may be sent bare or quoted', async () => {
    const product = await createProduct(app, { price: 3 }, 10);
    const customer = await aCustomer(app);
    const key = randomUUID();
    const order = (k: string) =>
      api({
        method: 'POST',
        url: '/api/v1/orders',
        headers: { authorization: customer.auth, 'idempotency-key': k },
        payload: { productId: product.id, quantity: 4 },
      });

    const first = await order(`"${key}"`);
    const bare = await order(key);

    expect(first.statusCode).toBe(201);
    expect(stored(bare)).toEqual(stored(first));
    expect(first.headers.location).toMatch(new RegExp(`/api/v1/orders/${first.json().id}$`));
    expect(await stockOf(app, product.id)).toEqual({ available: 6, reserved: 4 });
  });

  it('is scoped by the caller: the same key from two callers is two requests', async () => {
    const product = await createProduct(app, { price: 1 }, 10);
    const [a, b] = [await aCustomer(app), await aCustomer(app)];
    const key = newKey();
    const order = (auth: string) =>
      api({
        method: 'POST',
        url: '/api/v1/orders',
        headers: { authorization: auth, 'idempotency-key': key },
        payload: { productId: product.id, quantity: 1 },
      });

    const [fromA, fromB] = [await order(a.auth), await order(b.auth)];

    expect([fromA.statusCode, fromB.statusCode]).toEqual([201, 201]);
    expect(fromA.json().id).not.toBe(fromB.json().id);
    expect(fromB.headers['idempotent-replayed']).toBeUndefined();
    expect(await stockOf(app, product.id)).toEqual({ available: 8, reserved: 2 });
  });

  it('is the same request through the header-selected path (the routed path is fingerprinted)', async () => {
    const key = newKey();
    const payload = aUserRequest();
    const first = await keyed(key, { method: 'POST', url: '/api/v1/users', payload });
    const viaHeader = await keyed(key, {
      method: 'POST',
      url: '/api/users',
      headers: { 'x-api-version': '1' },
      payload,
    });

    expect(first.statusCode).toBe(201);
    expect(viaHeader.headers['idempotent-replayed']).toBe('true');
    expect(viaHeader.body).toBe(first.body);
  });
});

describe('another request under a used key', () => {
  const refusedAsReused = (refused: LightMyRequestResponse) => {
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['idempotent-replayed']).toBeUndefined();
    expect(refused.json()).toMatchObject({
      type: 'about:blank',
      title: 'Unprocessable Content',
      status: 422,
      detail: 'Idempotency-Key was already used for a different request.',
    });
  };

  it('is 422 for another body or another method, and the stored answer stays', async () => {
    const key = newKey();
    const payload = aUserRequest();
    const first = await keyed(key, { method: 'POST', url: '/api/v1/users', payload });
    const { id } = first.json<{ id: number }>();

    const otherBody = await keyed(key, { method: 'POST', url: '/api/v1/users', payload: aUserRequest() });
    const otherMethod = await keyed(key, { method: 'PATCH', url: `/api/v1/users/${id}`, payload: { name: 'Xavier' } });
    const original = await keyed(key, { method: 'POST', url: '/api/v1/users', payload });

    refusedAsReused(otherBody);
    refusedAsReused(otherMethod);
    expect(original.statusCode).toBe(201);
    expect(original.body).toBe(first.body);
    expect((await api({ method: 'GET', url: `/api/v1/users/${id}` })).json().name).toBe(payload.name);
  });

  it('is 422 for the same body to another path, which does not run', async () => {
    const { order } = await anOrder();
    const key = newKey();
    const confirmed = await keyed(key, { method: 'POST', url: `/api/v1/orders/${order.id}/confirmation`, payload: {} });
    const shipped = await keyed(key, { method: 'POST', url: `/api/v1/orders/${order.id}/shipment`, payload: {} });

    expect(confirmed.statusCode).toBe(200);
    refusedAsReused(shipped);
    expect((await api({ method: 'GET', url: `/api/v1/orders/${order.id}` })).json().status).toBe('CONFIRMED');
  });
});

describe('which answers are stored', () => {
  it('stores a 422 with nothing written: the retry gets it even after the cause is gone', async () => {
    const product = await createProduct(app, { price: 1 }, 1);
    const customer = await aCustomer(app);
    const key = newKey();
    const order = () =>
      api({
        method: 'POST',
        url: '/api/v1/orders',
        headers: { authorization: customer.auth, 'idempotency-key': key },
        payload: { productId: product.id, quantity: 3 },
      });
    const ordersBefore = await countRows('orders');

    const first = await order();
    await api({ method: 'PUT', url: `/api/stock/${product.id}`, payload: { available: 10 } });
    const retry = await order();

    expect(first.statusCode).toBe(422);
    expect(stored(retry)).toEqual(stored(first));
    expect(retry.json().detail).toMatch(/stock/i);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(await countRows('orders')).toBe(ordersBefore);
    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
  });

  it('stores a 409: a retried cancellation of a cancelled order replays it', async () => {
    const { order } = await anOrder();
    const cancel = {
      method: 'POST',
      url: `/api/v1/orders/${order.id}/cancellation`,
      payload: { reason: 'twice' },
    } as const;
    await api(cancel);
    const key = newKey();

    const first = await keyed(key, cancel);
    const retry = await keyed(key, cancel);

    expect(first.statusCode).toBe(409);
    expect(stored(retry)).toEqual(stored(first));
    expect(retry.headers['idempotent-replayed']).toBe('true');
  });

  it('does not store 400, 401, 403 or 404: the key still runs the request afterwards', async () => {
    const key = newKey();
    const payload = aUserRequest();
    const invalid = await keyed(key, { method: 'POST', url: '/api/v1/users', payload: { ...payload, email: 'nope' } });
    const unauthenticated = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { authorization: 'Bearer not-a-token', 'idempotency-key': key },
      payload,
    });
    const reader = await aCustomer(app, 'users:read');
    const forbidden = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { authorization: reader.auth, 'idempotency-key': key },
      payload,
    });
    const missing = await keyed(key, { method: 'PATCH', url: '/api/v1/users/999999999', payload: { name: 'Xavier' } });
    const stale = await keyed(key, { method: 'POST', url: '/api/v1/users', payload, headers: {} });

    expect(invalid.statusCode).toBe(400);
    expect(unauthenticated.statusCode).toBe(401);
    expect(forbidden.statusCode).toBe(403);
    expect(missing.statusCode).toBe(404);
    expect(stale.statusCode).toBe(201);
    expect(stale.headers['idempotent-replayed']).toBeUndefined();
  });

  it('does not store a 412: a retry with a current If-Match runs', async () => {
    const user = (await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() })).json<{ id: number }>();
    const key = newKey();
    const patch = (ifMatch: string) =>
      keyed(key, {
        method: 'PATCH',
        url: `/api/v1/users/${user.id}`,
        headers: { 'if-match': ifMatch },
        payload: { name: 'Yvonne' },
      });

    const refused = await patch('"9"');
    const accepted = await patch('"1"');

    expect(refused.statusCode).toBe(412);
    expect(accepted.statusCode).toBe(200);
    expect(accepted.headers.etag).toBe('"2"');
  });

  it('needs no key: requests without one run every time', async () => {
    const payload = aProductRequest();
    const first = await api({ method: 'POST', url: '/api/products', payload });
    const second = await api({ method: 'POST', url: '/api/products', payload });

    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(409); // the SKU is taken: it ran again
  });
});

describe('a malformed key', () => {
  it.each([
    ['an empty string', '""'],
    ['nothing but quotes', '"'],
    ['a space', '"two words"'],
    ['a quote inside', 'a"b'],
    ['a backslash', '"a\\\\b"'],
    ['256 characters', 'k'.repeat(256)],
    ['a list of two', '"a", "b"'],
  ])('is 400 (%s), and nothing runs', async (_name, key) => {
    const before = await countRows('products');

    const response = await keyed(key, { method: 'POST', url: '/api/products', payload: aProductRequest() });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: expect.stringContaining('Idempotency-Key'),
    });
    expect(await countRows('products')).toBe(before);
  });

  it('of 255 visible characters is a key', async () => {
    const response = await keyed('~'.repeat(255), { method: 'POST', url: '/api/products', payload: aProductRequest() });
    expect(response.statusCode).toBe(201);
  });
});

describe('concurrent requests with one key', () => {
  it('place one order and reserve once; every answer is that order (retrying on 409)', async () => {
    const product = await createProduct(app, { price: 1 }, 100);
    const customer = await aCustomer(app);
    const key = newKey();
    const ordersBefore = await countRows('orders');
    const send = async (): Promise<LightMyRequestResponse> => {
      for (;;) {
        const r = await api({
          method: 'POST',
          url: '/api/v1/orders',
          headers: { authorization: customer.auth, 'idempotency-key': key },
          payload: { productId: product.id, quantity: 3 },
        });
        if (r.statusCode !== 409) return r;
        expect(r.headers['retry-after']).toBe('1');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };

    const answers = await Promise.all(Array.from({ length: 30 }, send));

    expect(new Set(answers.map((a) => a.statusCode))).toEqual(new Set([201]));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    expect(await countRows('orders')).toBe(ordersBefore + 1);
    expect(await stockOf(app, product.id)).toEqual({ available: 97, reserved: 3 });
  });
});

describe.runIf(engine === 'postgres')('a retry while the first request still runs (PostgreSQL)', () => {
  it('is 409 with Retry-After: 1 and runs nothing; after the first ends it runs', async () => {
    // Another session holds the key's lock, as the first request's transaction does.
    // A session of its own, never through a pooler: a session lock outlives a pooled transaction.
    const client = postgres(config.database.kind === 'postgres' ? config.database.directUrl : '', {
      max: 1,
      onnotice: () => {},
    });
    const key = randomUUID();
    const subject = '999999999'; // the ADMIN token's sub
    const payload = aProductRequest();
    try {
      await client`select pg_advisory_lock(hashtextextended(${`${subject} ${key}`}, 0))`;
      const before = await countRows('products');
      const racing = await keyed(key, { method: 'POST', url: '/api/products', payload });
      expect(racing.statusCode).toBe(409);
      expect(racing.headers['retry-after']).toBe('1');
      expect(racing.json()).toMatchObject({ type: 'about:blank', title: 'Conflict', status: 409 });
      expect(await countRows('products')).toBe(before);
      await client`select pg_advisory_unlock_all()`;

      const after = await keyed(key, { method: 'POST', url: '/api/products', payload });
      expect(after.statusCode).toBe(201);
    } finally {
      await client.end();
    }
  });
});

describe.runIf(engine === 'postgres')('an outcome stored under the key after the request looked (PostgreSQL)', () => {
  // The key's read runs on the snapshot its statement began with: when the first request
  // commits and lets go of the lock between that snapshot and the lock, the second finds no
  // outcome, holds the lock and runs. This test makes that interleaving happen every time:
  // another session stores an outcome under the key while the request waits for a stock row.
  it('rolls the request back and answers 409; the retry replays the stored outcome', async () => {
    const product = await createProduct(app, { price: 1 }, 10);
    const customer = await aCustomer(app);
    const key = randomUUID();
    const body = JSON.stringify({ productId: product.id, quantity: 2 });
    const fingerprint = createHash('sha256').update('POST /api/v1/orders\n').update(body).digest('base64url');
    const send = () =>
      app.inject({
        method: 'POST',
        url: '/api/v1/orders',
        headers: { authorization: customer.auth, 'content-type': 'application/json', 'idempotency-key': key },
        payload: body,
      });
    // What the other session stores: a real order's answer, placed without the key.
    const first = await placeOrder(app, customer.auth, product.id, 2);
    expect(first.statusCode).toBe(201);
    const ordersBefore = await countRows('orders');

    const other = await app.db.startTransaction().execute();
    let racing: Promise<LightMyRequestResponse> | undefined;
    try {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(other);
      await sql`select 1 from stock where product_id = ${product.id} for update`.execute(other);
      await sql`
        insert into idempotency_keys (subject, key, fingerprint, status, headers, body, expires_at)
        values (${String(customer.id)}, ${key}, ${fingerprint}, 201,
                ${JSON.stringify({ 'content-type': first.headers['content-type'], location: first.headers.location })},
                ${first.body},
                now() + interval '1 hour')`.execute(other);
      racing = send();
      // The request has looked (no outcome) and now waits for the stock row this session holds.
      for (let waiting = 0; waiting === 0;) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        const blocked = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity where ${rows[0]!.pid}::int = any(pg_blocking_pids(pid))`.execute(
          app.db,
        );
        waiting = blocked.rows[0]!.n;
      }
      await other.commit().execute();
    } finally {
      if (!other.isCommitted) await other.rollback().execute();
    }

    const answer = await racing;
    expect(answer.statusCode, answer.body).toBe(409);
    expect(answer.headers['retry-after']).toBe('1');
    expect(await countRows('orders')).toBe(ordersBefore);
    expect(await stockOf(app, product.id)).toEqual({ available: 8, reserved: 2 });

    const retry = await send();
    expect(retry.statusCode).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toBe(first.body);
    expect(retry.headers.location).toBe(first.headers.location);
  });
});

describe('the stored answer and the write', () => {
  it('commit together: when the answer cannot be stored, the order is not placed either', async () => {
    const broken = await buildTestApp();
    const brokenApi = asAdmin(broken.app);
    const product = await createProduct(broken.app, { price: 1 }, 10);
    const customer = await aCustomer(broken.app);
    // Storing the answer now fails, after the handler has written the order.
    await sql`alter table idempotency_keys add constraint no_201 check (status <> 201)`.execute(broken.app.db);
    const ordersBefore = await countRows('orders', broken.app);

    const response = await brokenApi({
      method: 'POST',
      url: '/api/v1/orders',
      headers: { authorization: customer.auth, 'idempotency-key': newKey() },
      payload: { productId: product.id, quantity: 2 },
    });

    expect(response.statusCode).toBe(500);
    expect(await countRows('orders', broken.app)).toBe(ordersBefore);
    expect(await stockOf(broken.app, product.id)).toEqual({ available: 10, reserved: 0 });
  });
});

describe('expiry', () => {
  it('frees a key after IDEMPOTENCY_TTL_HOURS, and purges it in the background', async () => {
    const short = await buildTestApp({ IDEMPOTENCY_TTL_HOURS: String(1 / 3600) }); // one second
    const shortApi = asAdmin(short.app);
    const key = newKey();
    const post = () =>
      shortApi({
        method: 'POST',
        url: '/api/products',
        headers: { 'idempotency-key': key },
        payload: aProductRequest(),
      });

    const first = await post();
    const reused = await post();
    expect(first.statusCode).toBe(201);
    expect(reused.statusCode).toBe(422);
    // Past the TTL the key names nothing: a new request runs (and is stored in its place) …
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const later = await post();
    expect(later.statusCode).toBe(201);
    expect(later.json().id).not.toBe(first.json().id);
    // … and the purge, every second here, deletes it once it expires again.
    const deadline = Date.now() + 10_000;
    while ((await countRows('idempotency_keys', short.app)) > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await countRows('idempotency_keys', short.app)).toBe(0);
  });
});

describe('the OpenAPI document', () => {
  it('documents Idempotency-Key, If-Match, If-None-Match, ETag and their answers', async () => {
    type Operation = {
      parameters?: { in: string; name: string }[];
      responses: Record<string, { headers?: Record<string, unknown> }>;
    };
    const document = await resolvedDocument<{
      paths: Record<string, Record<string, Operation>>;
    }>(app);
    const op = (path: string, method: string) => document.paths[path]![method]!;
    const headerParameters = (o: Operation) => (o.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name);

    for (const [path, method] of [
      ['/api/v1/orders', 'post'],
      ['/api/v2/users/{id}', 'patch'],
      ['/api/v1/orders/{id}/shipment', 'post'],
      ['/api/products', 'post'],
    ] as const) {
      const o = op(path, method);
      expect(headerParameters(o), `${method} ${path}`).toContain('Idempotency-Key');
      expect(Object.keys(o.responses)).toEqual(expect.arrayContaining(['409', '422']));
      expect(o.responses['409']!.headers).toHaveProperty('Retry-After');
      const success = Object.entries(o.responses).find(([status]) => status.startsWith('2'));
      expect(success?.[1].headers, `${method} ${path}`).toHaveProperty('Idempotent-Replayed');
    }
    expect(headerParameters(op('/api/v1/users/{id}', 'put'))).toEqual(expect.arrayContaining(['If-Match']));
    expect(headerParameters(op('/api/v1/users/{id}', 'put'))).not.toContain('Idempotency-Key');
    expect(headerParameters(op('/api/v1/orders/{id}', 'delete'))).toContain('If-Match');
    expect(headerParameters(op('/api/v2/orders/{id}', 'get'))).toContain('If-None-Match');
    expect(op('/api/v2/orders/{id}', 'get').responses['200']!.headers).toHaveProperty('ETag');
    expect(op('/api/v2/orders/{id}', 'get').responses).toHaveProperty('304');
    expect(op('/api/v1/users/{id}', 'patch').responses).toHaveProperty('412');
    expect(headerParameters(op('/api/v1/users', 'get'))).toEqual([]);
  });
});

describe('concurrent replays of a finished key', () => {
  it('each get the stored answer: only a first request still running is 409', async () => {
    const key = newKey();
    const payload = aProductRequest();
    const first = await keyed(key, { method: 'POST', url: '/api/products', payload });
    expect(first.statusCode).toBe(201);
    const replays = await Promise.all(
      Array.from({ length: 30 }, () => keyed(key, { method: 'POST', url: '/api/products', payload })),
    );
    expect(replays.map((r) => r.statusCode)).toEqual(Array.from({ length: 30 }, () => 201));
    for (const r of replays) {
      expect(r.headers['idempotent-replayed']).toBe('true');
      expect(r.body).toBe(first.body);
    }
  });
});

describe('a replay is authorised like the request it repeats', async () => {
  // Webhook hosts answered without asking a DNS server (a public address, never dialled:
  // no dispatcher runs in this file).
  const { app: hooks } = await buildTestApp({}, { resolveHost: async () => ['93.184.215.14'] });

  it('refuses a token without admin the stored creation of a webhook subscription, secret and all', async () => {
    const key = newKey();
    const sub = '424242';
    const admin = await bearer({ sub, scope: 'admin webhooks:read webhooks:write' });
    const payload = { url: 'https://hooks.example.com/replay', events: ['order.*'] };
    const created = await hooks.inject({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { authorization: admin, 'idempotency-key': key },
      payload,
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toHaveProperty('secret');

    // The same caller, the same key and body, a token without admin.
    const withoutAdmin = await bearer({ sub, scope: 'webhooks:read webhooks:write' });
    const replay = await hooks.inject({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { authorization: withoutAdmin, 'idempotency-key': key },
      payload,
    });
    expect(replay.statusCode).toBe(403);
    expect(replay.headers['idempotent-replayed']).toBeUndefined();
    expect(replay.body).not.toContain('whsec_');
    // Without the scope, likewise; with both, the stored answer.
    const withoutScope = await bearer({ sub, scope: 'admin webhooks:read' });
    const noScope = await hooks.inject({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { authorization: withoutScope, 'idempotency-key': key },
      payload,
    });
    expect(noScope.statusCode).toBe(403);
    const again = await hooks.inject({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { authorization: admin, 'idempotency-key': key },
      payload,
    });
    expect(again.statusCode).toBe(201);
    expect(again.body).toBe(created.body);
  });

  it('refuses a token without admin the stored order it placed for another customer', async () => {
    const product = await createProduct(app, { price: 1 }, 100);
    const customer = await aCustomer(app);
    const key = newKey();
    const sub = '434343';
    const payload = { customerId: customer.id, items: [{ productId: product.id, quantity: 1 }] };
    const placed = await app.inject({
      method: 'POST',
      url: '/api/v2/orders',
      headers: { authorization: await bearer({ sub, scope: 'admin orders:write' }), 'idempotency-key': key },
      payload,
    });
    expect(placed.statusCode, placed.body).toBe(201);
    const replay = await app.inject({
      method: 'POST',
      url: '/api/v2/orders',
      headers: { authorization: await bearer({ sub, scope: 'orders:write' }), 'idempotency-key': key },
      payload,
    });
    expect(replay.statusCode).toBe(403);
    expect(replay.headers['idempotent-replayed']).toBeUndefined();
  });
});
