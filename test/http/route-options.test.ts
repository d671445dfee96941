// Fastify 5 builds `request.routeOptions` afresh at every read; the hooks every request passes
// read it through routeOptionsOf (src/http/request-context.ts), once per request. This counts
// the reads of the getter itself, whatever the hooks do with it.
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { afterAll, describe, expect, it } from 'vitest';
import { asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

let reads = 0;
const patched = new Set<object>();

/**
 * Shadows the getter on the prototype of each request it sees (one per plugin context that
 * declares routes; Fastify's own is not configurable), counting every read through it. The
 * hooks that ran before it in that first request are not counted: each request below is sent
 * twice, and only the second counts.
 */
const countReads: FastifyPluginAsync = fp(async (app) => {
  app.addHook('onRequest', (request, _reply, done) => {
    const proto = Object.getPrototypeOf(request) as object;
    if (patched.has(proto)) return done();
    let owner: object | null = proto;
    while (owner !== null && Object.getOwnPropertyDescriptor(owner, 'routeOptions') === undefined)
      owner = Object.getPrototypeOf(owner) as object | null;
    if (owner === null) return done(new Error('no routeOptions getter on the request'));
    const fastifys: object = owner;
    Object.defineProperty(proto, 'routeOptions', {
      configurable: true,
      get(this: object) {
        reads++;
        return Reflect.get(fastifys, 'routeOptions', this) as unknown;
      },
    });
    patched.add(proto);
    done();
  });
});

const { app } = await buildTestApp({}, { plugins: [countReads] });
const api = asAdmin(app);
afterAll(() => {
  for (const proto of patched) delete (proto as { routeOptions?: unknown }).routeOptions;
});

describe('request.routeOptions', () => {
  it('is read at most once per request, on every path through the hooks', async () => {
    const user = await createUser(app);
    const requests = [
      { method: 'GET', url: `/api/v1/users/${user.id}` }, // authenticated read: negotiation, auth, log, metrics
      { method: 'GET', url: '/api/public/health/live' }, // a probe: its log level comes from the route
      { method: 'POST', url: '/api/v1/users', payload: {} }, // a body validated: 400 from the error handler
      { method: 'GET', url: '/api/v1/users/not-a-number' }, // a bad path parameter, reported as sent
      { method: 'GET', url: '/api/v1/nothing-here' }, // no route: 404
      { method: 'DELETE', url: '/api/public/health/live' }, // wrong method: 405
    ] as const;
    let counted = 0;
    for (const request of requests) {
      await api(request);
      reads = 0;
      const response = await api(request);
      expect(response.statusCode, `${request.method} ${request.url}`).toBeLessThan(500);
      expect(reads, `${request.method} ${request.url}: ${response.statusCode}`).toBeLessThanOrEqual(1);
      counted += reads;
    }
    // The counter sees the reads: at least the routed requests read it once.
    expect(counted).toBeGreaterThanOrEqual(4);
  });
});
