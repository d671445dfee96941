// The typed client (clients/typescript) against the real service on a socket, both engines:
// typed calls, problems as typed errors, paging through Link, ETags, and retries that are safe
// with an Idempotency-Key. Its types are generated from the served document and must match it.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inspect, promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ProblemError,
  createResourceApi,
  parseLinks,
  unwrap,
  withRetries,
  type ResourceApi,
} from '../../clients/typescript/src/index.js';
import { buildTestApp } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';

const { app } = await buildTestApp();
let baseUrl: string;
let api: ResourceApi;
const token = ADMIN.replace(/^Bearer /, '');

beforeAll(async () => {
  baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
  api = createResourceApi({ baseUrl, token });
});
afterAll(() => app.close());

let sequence = 0;
const aUser = () => ({
  name: 'Client Test',
  email: `client-${String(process.pid)}-${String(Date.now())}-${String(sequence++)}@example.com`,
  password: 'correct horse battery',
});

describe('the generated types', () => {
  it('are what openapi-typescript makes of the served document today', async () => {
    const document = (await app.inject({ method: 'GET', url: '/api/public/openapi.json' })).json<object>();
    const generated = astToString(await openapiTS(document as never));
    const committed = await readFile(
      join(import.meta.dirname, '..', '..', 'clients', 'typescript', 'src', 'schema.ts'),
      'utf8',
    );
    // `npm run client:types` writes the file; a change to the document without it fails here.
    expect(committed.slice(committed.indexOf('export interface paths'))).toBe(
      generated.slice(generated.indexOf('export interface paths')),
    );
  });
});

describe('calls', () => {
  it('creates and reads a user with typed bodies, and the ETag to send back', async () => {
    const created = await unwrap(api.client.POST('/api/v1/users', { body: aUser() }));
    expect(created.response.status).toBe(201);
    expect(created.data.name).toBe('Client Test');

    const read = await unwrap(api.client.GET('/api/v1/users/{id}', { params: { path: { id: created.data.id } } }));
    expect(read.data).toEqual(created.data);
    expect(read.etag).toBe('"1"');
  });

  it('turns a problem into a ProblemError with the problem typed, and field errors in one shape', async () => {
    const missing = api.client.GET('/api/v1/users/{id}', { params: { path: { id: 987_654_321 } } });
    const notFound = await unwrap(missing).catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(ProblemError);
    expect((notFound as ProblemError).status).toBe(404);
    expect((notFound as ProblemError).problem.title).toBe('Entity Not Found');
    // Printed uncaught, it is its problem, not a dump of the raw Response (which stays readable).
    expect((notFound as ProblemError).response.status).toBe(404);
    const printed = inspect(notFound);
    expect(printed).toContain('404 Entity Not Found');
    expect(printed).not.toContain('Response {');
    expect(printed.split('\n').length).toBeLessThan(30);

    // v1 users list field errors as objects, v1 orders as "field: message", v2 as fieldErrors.
    const invalid: Promise<{ data?: unknown; error?: unknown; response: Response }>[] = [
      api.client.POST('/api/v1/users', { body: { name: 'A', email: 'not-an-email', password: 'x' } }),
      api.client.POST('/api/v1/orders', { body: { productId: 1, quantity: 0 } }),
      api.client.POST('/api/v2/users', { body: { ...aUser(), age: 12, address: { street: 'Main', postalCode: '1' } } }),
    ];
    for (const call of invalid) {
      const error = (await unwrap(call).catch((e: unknown) => e)) as ProblemError;
      expect(error.status).toBe(400);
      expect(error.fieldErrors.length).toBeGreaterThan(0);
      for (const f of error.fieldErrors) expect(f.field).not.toBe('');
    }
  });

  it('sends If-Match from an ETag: a stale one is a 412 ProblemError', async () => {
    const { data: user } = await unwrap(api.client.POST('/api/v1/users', { body: aUser() }));
    const path = { id: user.id };
    const first = await unwrap(api.client.GET('/api/v1/users/{id}', { params: { path } }));
    const changed = await unwrap(
      api.client.PATCH('/api/v1/users/{id}', {
        params: { path, header: { 'If-Match': first.etag! } },
        body: { name: 'Changed Once' },
      }),
    );
    expect(changed.etag).toBe('"2"');
    const stale = await unwrap(
      api.client.PATCH('/api/v1/users/{id}', {
        params: { path, header: { 'If-Match': first.etag! } },
        body: { name: 'Changed Twice' },
      }),
    ).catch((e: unknown) => e);
    expect((stale as ProblemError).status).toBe(412);
    expect((stale as ProblemError).problem.title).toBe('Precondition Failed');
  });
});

describe('paging', () => {
  it('walks every page through Link rel="next", with X-Total-Count', async () => {
    for (let i = 0; i < 5; i++) await unwrap(api.client.POST('/api/v1/users', { body: aUser() }));
    const first = await api.page(api.client.GET('/api/v1/users', { params: { query: { size: 2, sort: 'id' } } }));
    expect(first.items).toHaveLength(2);
    expect(first.next).toContain('page=1');

    const ids: number[] = [];
    for await (const user of api.all(api.client.GET('/api/v1/users', { params: { query: { size: 2, sort: 'id' } } })))
      ids.push(user.id);
    expect(ids).toHaveLength(first.total);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it('reads RFC 8288 Link headers', () => {
    expect(parseLinks('<http://x/a?page=1>; rel="next", <http://x/a?page=9>; rel="last"')).toEqual({
      next: 'http://x/a?page=1',
      last: 'http://x/a?page=9',
    });
    expect(parseLinks(null)).toEqual({});
  });
});

describe('retries with an Idempotency-Key', () => {
  it('places one order when the answer is lost on the way and the client retries', async () => {
    const product = await unwrap(
      api.client.POST('/api/products', { body: { sku: `CLIENT-${String(Date.now())}`, name: 'Client', price: 2.5 } }),
    );
    await unwrap(
      api.client.PUT('/api/stock/{productId}', {
        params: { path: { productId: product.data.id } },
        body: { available: 10 },
      }),
    );
    const { data: customer } = await unwrap(api.client.POST('/api/v1/users', { body: aUser() }));
    // The first answer is lost after the service has placed the order: the network fails.
    let lost = 0;
    const flaky = createResourceApi({
      baseUrl,
      token: await bearer({ sub: String(customer.id), scope: 'orders:read orders:write' }).then((b) =>
        b.replace(/^Bearer /, ''),
      ),
      fetch: async (request: Request) => {
        const response = await fetch(request);
        if (lost++ === 0) throw new TypeError('fetch failed: connection reset');
        return response;
      },
    });

    const order = await withRetries(
      (key) =>
        flaky.client.POST('/api/v1/orders', {
          params: { header: { 'Idempotency-Key': key } },
          body: { productId: product.data.id, quantity: 3 },
        }),
      { backoffMs: 10 },
    );

    expect(lost).toBe(2);
    expect(order.replayed).toBe(true);
    expect(order.response.status).toBe(201);
    expect(order.data.total).toBe(7.5);
    const orders = await api.page(api.client.GET('/api/v1/orders', { params: { query: { customerId: customer.id } } }));
    expect(orders.total).toBe(1);
    expect(orders.items.map((o) => o.id)).toEqual([order.data.id]);
    const stock = await unwrap(
      api.client.GET('/api/stock/{productId}', { params: { path: { productId: product.data.id } } }),
    );
    expect(stock.data).toMatchObject({ available: 7, reserved: 3 });
  });

  it('does not retry an answer that is final', async () => {
    let sent = 0;
    const error = await withRetries(
      (key) => {
        sent++;
        return api.client.POST('/api/v1/orders', {
          params: { header: { 'Idempotency-Key': key } },
          body: { productId: 999_999_999, quantity: 1 },
        });
      },
      { backoffMs: 1 },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProblemError);
    expect(sent).toBe(1);
  });
});

describe('the example in clients/typescript/examples', () => {
  it('runs as its header says, importing the client by its package name, and prints each step', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '../../clients/typescript/examples/place-an-order.ts')],
      {
        env: { PATH: process.env.PATH ?? '', TOKEN: token, BASE_URL: baseUrl },
        cwd: join(import.meta.dirname, '..', '..'),
      },
    );

    expect(stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^product \d+: Example mug at 12\.5, 10 in stock$/),
      expect.stringMatching(/^customer \d+: customer-\w+@example\.com$/),
      expect.stringMatching(/^order \d+: PENDING, total 37\.5, etag "1"$/),
      expect.stringMatching(/^order \d+: CONFIRMED, etag "2"$/),
      'a stale If-Match: 412 Precondition Failed',
    ]);
  });
});
