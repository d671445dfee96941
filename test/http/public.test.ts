// /api/public/**: health, the OpenAPI document, the docs page and the problem pages (docs/operations.md#running-several-instances).
import { describe, expect, it } from 'vitest';
import { PROBLEM_TYPES } from '../../src/http/problems/problem-types.js';
import { resolvedDocument } from '../support/openapi.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();

describe('health', () => {
  it('reports liveness', async () => {
    const response = await app.inject({ method: 'GET', url: '/api/public/health/live' });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ status: 'UP' });
    expect(response.headers['cache-control']).toBe('no-store');
  });

  it('reports readiness after asking the database', async () => {
    const response = await app.inject({ method: 'GET', url: '/api/public/health/ready' });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ status: 'UP' });
  });
});

describe('GET /api/public/openapi.json', () => {
  it('serves an OpenAPI 3.1 document generated from the route schemas', async () => {
    const response = await app.inject({ method: 'GET', url: '/api/public/openapi.json' });

    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    const doc = await resolvedDocument(app);
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/v1/users',
        '/api/v1/users/{id}',
        '/api/v1/users/{id}/password-changes',
        '/api/v1/users/{id}/password-resets',
        '/api/public/health/ready',
      ]),
    );
    const create = doc.paths['/api/v1/users'].post;
    const createSchema = create.requestBody.content['application/json'].schema;
    expect(createSchema.required).toEqual(['name', 'email', 'password']);
    expect(createSchema.properties.password).toMatchObject({
      minLength: 8,
      maxLength: 72,
      writeOnly: true,
    });
    expect(create.responses['201'].content['application/json'].schema.properties).not.toHaveProperty('passwordHash');
    expect(create.responses['409'].content).toHaveProperty('application/problem+json');
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    expect(doc.components.securitySchemes.bearerAuth.description).toContain('RFC8725');
  });
});

describe('the OpenAPI document covers every route', () => {
  it('lists the products, stock and orders routes', async () => {
    const doc = await resolvedDocument(app);

    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/products',
        '/api/products/{id}',
        '/api/stock/{productId}',
        '/api/v1/orders',
        '/api/v1/orders/{id}',
        '/api/v1/orders/{id}/cancellation',
        '/api/v1/orders/{id}/confirmation',
        '/api/v1/orders/{id}/shipment',
        '/api/v1/orders/{id}/delivery',
        '/api/v1/orders/{id}/items',
      ]),
    );
    expect(
      doc.paths['/api/v1/orders/{id}/cancellation'].post.requestBody.content['application/json'].schema.required,
    ).toEqual(['reason']);
    expect(doc.paths['/api/products/{id}'].get.responses).toHaveProperty('304');
  });

  it('documents both versions, with their vendor media types and how to select one', async () => {
    const doc = await resolvedDocument(app);

    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/api/v2/users', '/api/v2/users/{id}', '/api/v2/orders', '/api/v2/orders/{id}/items']),
    );
    expect(Object.keys(doc.paths['/api/v1/users/{id}'].get.responses['200'].content)).toEqual([
      'application/json',
      'application/vnd.resource-api.v1+json',
    ]);
    expect(Object.keys(doc.paths['/api/v2/users/{id}'].get.responses['200'].content)).toEqual([
      'application/json',
      'application/vnd.resource-api.v2+json',
    ]);
    expect(Object.keys(doc.paths['/api/products/{id}'].get.responses['200'].content)).toEqual(['application/json']);
    expect(doc.paths['/api/v2/users'].post.requestBody.content['application/json'].schema.required).toEqual([
      'name',
      'email',
      'password',
      'age',
      'address',
    ]);
    expect(
      doc.paths['/api/v2/orders'].post.requestBody.content['application/json'].schema.properties.items,
    ).toMatchObject({ minItems: 1 });
    expect(doc.info.description).toContain('X-API-Version');
    expect(doc.info.description).toContain('application/vnd.resource-api.vN+json');
  });

  it('gives every operation a success response and its problems as application/problem+json', async () => {
    const doc = await resolvedDocument(app);
    const operations = Object.entries(
      doc.paths as Record<
        string,
        Record<string, { responses: Record<string, { content?: Record<string, unknown> }>; security?: unknown[] }>
      >,
    ).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, path, op })),
    );

    expect(operations.length).toBeGreaterThan(25);
    for (const { name, path, op } of operations) {
      const statuses = Object.keys(op.responses);
      expect(
        statuses.some((s) => /^2\d\d$/.test(s)),
        name,
      ).toBe(true);
      if (!path.startsWith('/api/public/')) {
        expect(statuses, name).toEqual(expect.arrayContaining(['401', '403']));
        for (const status of statuses.filter((s) => /^[45]\d\d$/.test(s)))
          expect(Object.keys(op.responses[status]!.content ?? {}), `${name} ${status}`).toEqual([
            'application/problem+json',
          ]);
      }
    }
  });
});

describe('GET /api/public/docs', () => {
  it('serves the interactive documentation page', async () => {
    const response = await app.inject({ method: 'GET', url: '/api/public/docs/' });

    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/html/);
    expect(response.body).toContain('swagger-ui');
  });
});

describe('GET /api/public/problems/{slug}', () => {
  it.each(Object.entries(PROBLEM_TYPES))('describes %s', async (slug, type) => {
    const response = await app.inject({ method: 'GET', url: `/api/public/problems/${slug}` });

    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(response.body).toContain(`<h1>${type.title}</h1>`);
    expect(response.body).toContain(`<code>${type.status}</code>`);
  });

  it('answers an unknown slug with 404', async () => {
    const response = await app.inject({ method: 'GET', url: '/api/public/problems/no-such-thing' });

    expect(response.statusCode).toBe(404);
    expect(response.headers['content-type']).toBe('application/problem+json');
  });
});
