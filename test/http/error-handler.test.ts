// The error handler in isolation (STYLE, Tests): the real plugins on a bare instance with
// throwaway routes that fail in the ways real code can.
import { Writable } from 'node:stream';
import Fastify, { LogController } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import problems from '../../src/http/problems/error-handler.js';
import requestContext, { genReqId } from '../../src/http/request-context.js';
import { RouteTable } from '../../src/http/route-table.js';
import { BusinessRuleViolation, Conflict, DatabaseUnavailable, EntityNotFound } from '../../src/errors.js';
import { testConfig } from '../support/test-app.js';

const logs: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

const app = Fastify({
  loggerInstance: pino({ level: 'info' }, sink),
  genReqId,
  logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
});
app.decorate('config', testConfig({ ERROR_TYPE_BASE: 'https://errors.example.com/p' }));
await app.register(requestContext);
await app.register(problems, { routes: new RouteTable() });
app.get('/boom', async () => {
  throw new Error('connect ECONNREFUSED /var/run/secret.sock at Object.<anonymous> (/srv/app/src/x.ts:1:1)');
});
app.get('/typed/missing', async () => {
  throw new EntityNotFound('Order', 7);
});
app.get('/orders-form/missing', { config: { problemForm: 'orders-v1' } }, async () => {
  throw new EntityNotFound('Order', 7);
});
app.get('/typed/conflict', async () => {
  throw new Conflict('Taken.', 'sku');
});
app.get('/rule', async () => {
  throw new BusinessRuleViolation('Not enough stock.', { productId: 3 });
});
app.get('/db-down', async () => {
  throw new DatabaseUnavailable();
});
await app.ready();

describe('error handler', () => {
  it('answers an unhandled error with the fixed 500 and a requestId that matches the logged error', async () => {
    const response = await app.inject({ method: 'GET', url: '/boom?q=1' });

    expect(response.statusCode).toBe(500);
    expect(response.headers['content-type']).toBe('application/problem+json');
    const body = response.json();
    expect(body).toEqual({
      type: 'https://errors.example.com/p/internal-error',
      title: 'Internal Server Error',
      status: 500,
      detail: 'An unexpected error occurred',
      instance: '/boom',
      requestId: response.headers['x-request-id'],
    });
    expect(response.body).not.toMatch(/ECONNREFUSED|secret|\/srv|\.ts/);
    const logged = logs.find((l) => l.requestId === body.requestId && l.level === 50);
    expect(logged).toMatchObject({ msg: 'unhandled error', err: { message: expect.stringContaining('ECONNREFUSED') } });
  });

  it('renders a missing entity in the typed form by default', async () => {
    const response = await app.inject({ method: 'GET', url: '/typed/missing' });

    expect(response.json()).toEqual({
      type: 'https://errors.example.com/p/entity-not-found',
      title: 'Entity Not Found',
      status: 404,
      detail: 'Order 7 not found',
      instance: '/typed/missing',
    });
  });

  it('renders a missing order in the v1 orders form with orderId', async () => {
    const response = await app.inject({ method: 'GET', url: '/orders-form/missing' });

    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Order not found',
      status: 404,
      detail: 'Order 7 not found',
      instance: '/orders-form/missing',
      orderId: 7,
    });
  });

  it('renders a typed conflict with conflictingField', async () => {
    const response = await app.inject({ method: 'GET', url: '/typed/conflict' });

    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      type: 'https://errors.example.com/p/conflict',
      title: 'Conflict',
      status: 409,
      detail: 'Taken.',
      instance: '/typed/conflict',
      conflictingField: 'sku',
    });
  });

  it('renders a business rule violation as 422 with its extensions', async () => {
    const response = await app.inject({ method: 'GET', url: '/rule' });

    expect(response.json()).toEqual({
      type: 'https://errors.example.com/p/business-rule-violation',
      title: 'Business Rule Violation',
      status: 422,
      detail: 'Not enough stock.',
      instance: '/rule',
      productId: 3,
    });
  });

  it('answers an unreachable database with 503 and Retry-After', async () => {
    const response = await app.inject({ method: 'GET', url: '/db-down' });

    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The service cannot reach its database. Retry later.',
      instance: '/db-down',
    });
  });
});
