// docs/api-guide.md#limits-and-time-outs rule by rule: nesting, characters that cannot be stored, `rejected` as sent,
// malformed requests below Fastify, and no error ever reaching Fastify's default handler.
import { connect } from 'node:net';
import type { FastifyPluginAsync } from 'fastify';
import { describe, expect, it } from 'vitest';
import { asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

// Routes that throw at every stage of a request, to prove each ends in the problem handler.
const throwing: FastifyPluginAsync = async (app) => {
  const config = { scope: 'users:read' };
  const ok = { 200: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] } };
  app.get(
    '/test/throws/on-request',
    { config, onRequest: (_q, _r, done) => done(new Error('boom in onRequest at /secret/path.js:1')) },
    async () => ({ id: 1 }),
  );
  app.get(
    '/test/throws/pre-handler',
    {
      config,
      preHandler: async () => Promise.reject(new TypeError("Cannot read properties of undefined (reading 'x')")),
    },
    async () => ({ id: 1 }),
  );
  app.get('/test/throws/handler', { config }, () => {
    throw new RangeError('Maximum call stack size exceeded');
  });
  app.get('/test/throws/serializer', { config, schema: { response: ok } }, async () => ({ name: 'no id' }));
  // Throws on the route's own payload (the problem that follows passes the same hook).
  app.get(
    '/test/throws/on-send',
    {
      config,
      onSend: (_q, reply, payload, done) =>
        String(reply.getHeader('content-type')).includes('problem')
          ? done(null, payload)
          : done(new Error('boom in onSend')),
    },
    async () => ({ id: 1 }),
  );
  app.get('/test/throws/unrenderable', { config }, async () => {
    // An error whose every property throws: rendering it must fail, and fall back.
    throw new Proxy(new Error('x'), {
      get() {
        throw new Error('getter exploded');
      },
      getPrototypeOf() {
        throw new Error('prototype exploded');
      },
    });
  });
};

const { app, logs } = await buildTestApp({}, { plugins: [throwing] });
const api = asAdmin(app);

const nested = (depth: number, leaf = '1') => `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;

describe('nesting deeper than 64 levels', () => {
  it.each([65, 10_000, 100_000])('is 400 before any schema runs, as a member (%i levels)', async (depth) => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'content-type': 'application/json' },
      payload: `{"name":${nested(depth)},"email":"a@b.co","password":"long enough password"}`,
    });

    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'The request body is nested deeper than 64 levels.',
      instance: '/api/v1/users',
    });
  });

  it('is 400 at the root and in objects too', async () => {
    for (const payload of [nested(100_000), `${'{"a":'.repeat(70)}1${'}'.repeat(70)}`]) {
      const response = await api({
        method: 'POST',
        url: '/api/v2/orders',
        headers: { 'content-type': 'application/json' },
        payload,
      });
      expect(response.statusCode).toBe(400);
      expect(response.json().detail).toBe('The request body is nested deeper than 64 levels.');
    }
  });

  it('lets 64 levels through to the schema, and ignores brackets inside strings', async () => {
    const atLimit = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'content-type': 'application/json' },
      payload: `{"name":${nested(63)},"email":"a@b.co","password":"long enough password"}`,
    });
    expect(atLimit.statusCode).toBe(400);
    expect(atLimit.json().errors).toEqual([
      { field: 'name', message: 'must be a string', rejected: JSON.stringify(JSON.parse(nested(63))) },
    ]);

    const inString = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: '['.repeat(100), email: `brackets${Date.now()}@example.com`, password: 'long enough password' },
    });
    expect(inString.statusCode).toBe(201);
    expect(inString.json().name).toBe('['.repeat(100));
  });
});

describe('strings the database cannot store', () => {
  it('refuses a NUL character with a field error in the v1 users form', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: 'a\u0000b', email: 'nul@example.com', password: 'long enough password' },
    });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Validation Error',
      status: 400,
      detail: 'Validation failed',
      instance: '/api/v1/users',
      errors: [{ field: 'name', message: 'must not contain NUL characters', rejected: 'a\u0000b' }],
    });
  });

  it('names nested fields in the typed form, and refuses unpaired surrogates', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v2/users',
      payload: `{"name":"ok","email":"x\\ud800@example.com","password":"long enough password","age":30,"address":{"street":"Main\\u0000St","postalCode":"10115"}}`,
      headers: { 'content-type': 'application/json' },
    });

    expect(response.statusCode).toBe(400);
    expect(response.json().fieldErrors).toEqual([
      { field: 'address.street', message: 'must not contain NUL characters' },
      { field: 'email', message: 'must not contain unpaired surrogates' },
    ]);
  });

  it('stores a well-formed astral character and a bare backslash-u text as sent', async () => {
    const name = '😀 \\u0000 é';
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name, email: `astral${Date.now()}@example.com`, password: 'long enough password' },
    });
    expect(response.statusCode).toBe(201);
    const read = await api({ method: 'GET', url: `/api/v1/users/${response.json().id}` });
    expect(read.json().name).toBe(name);
  });

  it('answers 400, not 500, when a query value holds a NUL', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/orders?status=PENDING%00' });
    expect(response.statusCode).toBe(400);
  });
});

describe('rejected values are echoed as sent', () => {
  it.each([
    ['/api/v1/users/99999999999999999999', 'id', '99999999999999999999'],
    ['/api/v1/users/1e309', 'id', '1e309'],
    ['/api/v1/users?page=99999999999999999999', 'page', '99999999999999999999'],
    ['/api/v1/users?size=1e400', 'size', '1e400'],
  ])('%s', async (url, field, rejected) => {
    const response = await api({ method: 'GET', url });
    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual([expect.objectContaining({ field, rejected })]);
  });

  it('refuses a number too large for any column in a body (1e309 parses to Infinity)', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/orders',
      headers: { 'content-type': 'application/json' },
      payload: '{"productId":1e309,"quantity":1}',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual(['productId: must be an integer']);
  });

  it('names a non-finite number deep in a body by its path', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v2/orders',
      headers: { 'content-type': 'application/json' },
      payload: '{"customerId":1,"items":[{"productId":1,"quantity":1},{"productId":1,"quantity":-1e309}]}',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().fieldErrors).toEqual([{ field: 'items[1].quantity', message: 'must be an integer' }]);
  });

  it('lists at most the first 1,000 field errors of a body that breaks more rules', async () => {
    // 1,200 lines with two wrong members each: 2,400 broken rules and the list's own bound.
    const items = Array.from({ length: 1200 }, () => ({ productId: 'x', quantity: 'y' }));
    const response = await api({ method: 'POST', url: '/api/v2/orders', payload: { customerId: 1, items } });
    expect(response.statusCode).toBe(400);
    const { fieldErrors } = response.json<{ fieldErrors: { field: string }[] }>();
    expect(fieldErrors).toHaveLength(1000);
    expect(fieldErrors.slice(0, 3).map((e) => e.field)).toEqual(['items', 'items[0].productId', 'items[0].quantity']);
  });
});

describe('requests that never reach a route', () => {
  it('answers a malformed URL with a problem document', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users/%zz' });
    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.json()).toMatchObject({ type: 'about:blank', title: 'Bad Request', status: 400 });
  });

  it('answers what Node cannot parse as HTTP with a problem document, on a real socket', async () => {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(address);
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => socket.end(text));
        let out = '';
        socket.on('data', (d) => (out += d.toString()));
        socket.on('end', () => resolve(out));
        socket.on('error', reject);
      });

    const garbage = await raw('GARBAGE / HTTP/1.1\r\n\r\n');
    const hugeHeader = await raw(
      `GET /api/public/health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );

    expect(garbage).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(garbage).toContain('Content-Type: application/problem+json');
    expect(JSON.parse(garbage.slice(garbage.indexOf('\r\n\r\n') + 4))).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'The request could not be parsed as HTTP.',
    });
    expect(hugeHeader).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(JSON.parse(hugeHeader.slice(hugeHeader.indexOf('\r\n\r\n') + 4)).status).toBe(431);
  });
});

describe('a throw at any stage ends in the problem handler', () => {
  it.each(['on-request', 'pre-handler', 'handler', 'serializer', 'on-send', 'unrenderable'])(
    '%s → 500 problem without the error text',
    async (stage) => {
      const response = await api({ method: 'GET', url: `/test/throws/${stage}` });

      expect(response.statusCode).toBe(500);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      const body = response.json();
      expect(body).toMatchObject({
        title: 'Internal Server Error',
        status: 500,
        detail: 'An unexpected error occurred',
        instance: `/test/throws/${stage}`,
      });
      expect(body.requestId).toBe(response.headers['x-request-id']);
      expect(response.body).not.toMatch(/boom|Cannot read|Maximum call|exploded|secret|required/);
      expect(logs.some((l) => l.requestId === body.requestId && l.level === 50)).toBe(true);
    },
  );

  it('parses and validates into problems too (parser and validation stages)', async () => {
    const parser = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'content-type': 'application/json' },
      payload: '{"name":',
    });
    const validation = await api({ method: 'POST', url: '/api/v1/users', payload: { name: 1 } });
    expect(parser.statusCode).toBe(400);
    expect(parser.json().detail).toBe('The request body is not valid JSON.');
    expect(validation.statusCode).toBe(400);
    expect(validation.json().title).toBe('Validation Error');
  });

  it('keeps serving afterwards', async () => {
    const user = await createUser(app);
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).statusCode).toBe(200);
  });
});
