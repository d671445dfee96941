// The OpenAPI document as clients and their tools read it (issue: "an OpenAPI document clients
// can trust"), and the checker that holds every test's answers to it.
import type { FastifyPluginAsync } from 'fastify';
import { describe, expect, it } from 'vitest';
import { operationIdOf } from '../../src/http/openapi/document.js';
import { createProduct } from '../support/factories.js';
import { checkedAnswers, violations } from '../support/openapi-conformance.js';
import { buildTestApp } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';

// Routes that answer what their schema does not say, to prove the checker notices.
const drifting: FastifyPluginAsync = async (app) => {
  const config = { scope: 'users:read' };
  const schema = {
    response: {
      200: {
        type: 'object',
        required: ['id'],
        properties: { id: { type: 'integer', minimum: 1, maximum: 10, format: 'int32' } },
      },
    },
  };
  app.get('/api/drift/body', { config, schema }, async (_request, reply) =>
    reply.type('application/json').send('{"name":"no id"}'),
  );
  app.get('/api/drift/status', { config, schema }, async (_request, reply) =>
    reply.code(202 as never).send({ id: 1 } as never),
  );
  app.get('/api/drift/header', { config, schema }, async (_request, reply) =>
    reply.header('ratelimit', 'plenty left').send({ id: 1 }),
  );
  app.get('/api/drift/media', { config, schema }, async (_request, reply) => reply.type('text/plain').send('id=1'));
};

const { app } = await buildTestApp({}, { plugins: [drifting] });
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; headers: Record<string, unknown> };
  tags: { name: string; description: string }[];
};
type Operation = {
  operationId: string;
  description: string;
  tags?: string[];
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Record<string, unknown> }> };
  responses: Record<string, { content?: Record<string, unknown> }>;
};
const document = (await app.inject({ method: 'GET', url: '/api/public/openapi.json' })).json<Document>();
const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
  Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
);

describe('the response checker every test file runs', () => {
  it('finds an undocumented body, status and media type, and passes a documented answer', async () => {
    const get = (url: string) => app.inject({ method: 'GET', url, headers: { authorization: ADMIN } });
    const before = checkedAnswers(app);
    expect((await get('/api/v1/users?size=1')).statusCode).toBe(200);
    expect(violations(app)).toEqual([]);
    expect(checkedAnswers(app)).toBe(before + 1);

    await get('/api/drift/body');
    await get('/api/drift/status');
    await get('/api/drift/media');

    const found = violations(app).splice(0); // taken out, so that the file's own check passes
    expect(found).toEqual([
      expect.objectContaining({
        request: 'GET /api/drift/body',
        problem: expect.stringMatching(/must have required property 'id'/),
      }),
      expect.objectContaining({
        request: 'GET /api/drift/status',
        status: 202,
        problem: expect.stringMatching(/not documented/),
      }),
      expect.objectContaining({ request: 'GET /api/drift/media', problem: 'media type text/plain is not documented' }),
    ]);
  });

  it('checks documented headers: a RateLimit field out of its syntax is reported', async () => {
    await app.inject({ method: 'GET', url: '/api/drift/header', headers: { authorization: ADMIN } });
    const found = violations(app).splice(0);
    expect(found).toEqual([
      expect.objectContaining({
        request: 'GET /api/drift/header',
        problem: expect.stringMatching(/^header RateLimit: /),
      }),
    ]);
  });
});

describe('the document', () => {
  it('names every operation with a stable operationId, a description and a declared tag', () => {
    const declared = new Set(document.tags.map((t) => t.name));
    const ids = operations.map((o) => o.operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, operation } of operations) {
      if (path.startsWith('/api/drift/')) continue;
      expect(operation.operationId).toBe(operationIdOf(method, path));
      expect(operation.description, `${method} ${path}`).toBeTruthy();
      expect(operation.tags?.length, `${method} ${path}`).toBeGreaterThan(0);
      for (const tag of operation.tags ?? []) expect(declared).toContain(tag);
    }
    expect(operationIdOf('post', '/api/v1/orders/{id}/cancellation')).toBe('postV1OrdersByIdCancellation');
    expect(operationIdOf('get', '/api/public/health/live')).toBe('getHealthLive');
  });

  it('defines the wire shapes once, as components referred to with $ref', () => {
    expect(Object.keys(document.components.schemas)).toEqual(
      expect.arrayContaining(['Problem', 'UserResponse', 'UserResponseV2', 'OrderDetail', 'UserPage', 'OrderPage']),
    );
    expect(Object.keys(document.components.headers)).toEqual(
      expect.arrayContaining(['RateLimit', 'RateLimit-Policy', 'ETag', 'Retry-After']),
    );
    const get = document.paths['/api/v1/users/{id}']!.get!;
    expect(get.responses['200']!.content).toEqual({
      'application/json': { schema: { $ref: '#/components/schemas/UserResponse' } },
      'application/vnd.resource-api.v1+json': { schema: { $ref: '#/components/schemas/UserResponse' } },
    });
    expect(JSON.stringify(document).length).toBeLessThan(250_000);
  });

  it('does not require what the service does not: defaulted parameters, empty action bodies', () => {
    const list = document.paths['/api/v1/users']!.get!;
    for (const name of ['page', 'size', 'sort'])
      expect(list.parameters!.find((p) => p.name === name)!.required, name).toBe(false);
    expect(document.paths['/api/v1/orders/{id}/confirmation']!.post!.requestBody!.required).toBe(false);
    expect(document.paths['/api/v1/orders/{id}/cancellation']!.post!.requestBody!.required).toBe(true);
  });

  it('declares no content for 204, and 401, 403, 429 and 500 where they can happen', () => {
    expect(document.paths['/api/v1/users/{id}']!.delete!.responses['204']!.content).toBeUndefined();
    for (const { path, method, operation } of operations) {
      if (path.startsWith('/api/drift/')) continue;
      expect(Object.keys(operation.responses), `${method} ${path}`).toContain('500');
      if (path.startsWith('/api/public/')) continue;
      expect(Object.keys(operation.responses), `${method} ${path}`).toEqual(
        expect.arrayContaining(['401', '403', '429']),
      );
    }
  });

  it('documents /api/users/** and /api/orders/**, whose version X-API-Version or Accept chooses', () => {
    const get = document.paths['/api/users/{id}']!.get!;
    expect(get.operationId).toBe('getUsersById');
    expect(get.parameters!.find((p) => p.name === 'X-API-Version')).toMatchObject({
      in: 'header',
      required: false,
      schema: { enum: ['1', '2'] },
    });
    expect(get.responses['200']!.content).toEqual({
      'application/json': {
        schema: {
          anyOf: [{ $ref: '#/components/schemas/UserResponse' }, { $ref: '#/components/schemas/UserResponseV2' }],
        },
      },
      'application/vnd.resource-api.v1+json': { schema: { $ref: '#/components/schemas/UserResponse' } },
      'application/vnd.resource-api.v2+json': { schema: { $ref: '#/components/schemas/UserResponseV2' } },
    });
    expect(Object.keys(document.paths)).toEqual(
      expect.arrayContaining(['/api/users', '/api/orders', '/api/orders/{id}/cancellation', '/api/orders/{id}/items']),
    );
    expect(document.paths['/api/users']!.post!.requestBody!.required).toBe(true);
  });

  it('states money so that standard validators accept 19.99, and the service still refuses 19.999', async () => {
    const request = document.components.schemas.ProductRequest as {
      properties: { price: Record<string, unknown> };
    };
    expect(request.properties.price.multipleOf).toBeUndefined();
    expect(request.properties.price['x-decimal-places']).toBe(2);
    expect((await createProduct(app, { price: 19.99 })).price).toBe(19.99);
    const refused = await app.inject({
      method: 'POST',
      url: '/api/products',
      headers: { authorization: ADMIN },
      payload: { sku: 'MONEY-1', name: 'Money', price: 19.999 },
    });
    expect(refused.statusCode).toBe(400);
  });

  it('bounds every string, array and integer (OWASP API4)', () => {
    const unbounded: string[] = [];
    const walk = (node: unknown, where: string) => {
      if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${where}/${i}`));
      if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
      const schema = node as Record<string, unknown>;
      const types = [schema.type].flat();
      if (types.includes('string') && schema.maxLength === undefined && schema.enum === undefined)
        unbounded.push(where);
      if (types.includes('array') && schema.maxItems === undefined) unbounded.push(where);
      if (types.includes('integer') && (schema.maximum === undefined || schema.format === undefined))
        unbounded.push(where);
      for (const [key, value] of Object.entries(schema)) walk(value, `${where}/${key}`);
    };
    const paths = Object.entries(document.paths).filter(([path]) => !path.startsWith('/api/drift/'));
    walk(Object.fromEntries(paths), '#/paths');
    walk(document.components, '#/components');
    expect(unbounded).toEqual([]);
  });
});
