// The cross-origin policy (spec 4.4, docs/api-guide.md#cross-origin-requests-cors) on a real socket, where headers are what a
// browser sees.
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';

// docs/api-guide.md#safe-retries: the spec's headers plus those of the additive features, in this order.
const ALLOWED =
  'Content-Type, Authorization, If-Match, If-None-Match, Idempotency-Key, X-API-Version, X-Request-Id, Last-Event-ID, traceparent, tracestate';
const EXPOSED =
  'X-Total-Count, Location, ETag, Link, Retry-After, Idempotent-Replayed, RateLimit, RateLimit-Policy, X-Request-Id';

const ORIGINS = 'https://app.example.com,https://*.example.org,http://localhost:3000';
const { app } = await buildTestApp({ CORS_ALLOWED_ORIGINS: ORIGINS });
await app.listen({ port: 0, host: '127.0.0.1' });
const port = (app.server.address() as AddressInfo).port;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res
        .on('data', (d: Buffer) => (text += d.toString()))
        .on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const preflight = (path: string, origin: string, method: string, requestHeaders?: string) =>
  send('OPTIONS', path, {
    origin,
    'access-control-request-method': method,
    ...(requestHeaders ? { 'access-control-request-headers': requestHeaders } : {}),
  });

const corsHeaders = (a: Answer) =>
  Object.fromEntries(Object.entries(a.headers).filter(([k]) => k.startsWith('access-control-')));
const vary = (a: Answer) =>
  String(a.headers.vary ?? '')
    .split(',')
    .map((v) => v.trim());

describe('preflight under /api/**', () => {
  it('answers an allowed preflight with 204 and the four headers, without authentication', async () => {
    const answer = await preflight('/api/v1/users/1', 'https://app.example.com', 'PUT', 'content-type, authorization');

    expect(answer.status).toBe(204);
    expect(answer.body).toBe('');
    expect(corsHeaders(answer)).toEqual({
      'access-control-allow-origin': 'https://app.example.com',
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
      'access-control-allow-headers': ALLOWED,
      'access-control-max-age': '3600',
    });
    expect(vary(answer)).toEqual(
      expect.arrayContaining(['Origin', 'Access-Control-Request-Method', 'Access-Control-Request-Headers']),
    );
  });

  it('allows the conditional, idempotency, versioning and request-id headers (docs/api-guide.md#safe-retries)', async () => {
    const answer = await preflight(
      '/api/v1/orders/1',
      'https://app.example.com',
      'PATCH',
      'content-type, authorization, if-match, idempotency-key, x-api-version, x-request-id',
    );
    expect(answer.status).toBe(204);
    expect(answer.headers['access-control-allow-origin']).toBe('https://app.example.com');
  });

  it.each([
    ['an origin not on the list', 'https://evil.example.com', 'PUT', 'content-type'],
    ['a method not allowed', 'https://app.example.com', 'TRACE', undefined],
    ['a header not allowed', 'https://app.example.com', 'GET', 'x-custom-header'],
  ])(
    'refuses %s with 204 and no Access-Control-Allow-* header (never 401/403)',
    async (_name, origin, method, requestHeaders) => {
      const answer = await preflight('/api/v1/users', origin, method, requestHeaders);

      expect(answer.status).toBe(204);
      expect(corsHeaders(answer)).toEqual({});
      expect(vary(answer)).toContain('Origin');
    },
  );

  it.each([
    ['https://shop.example.org', true],
    ['https://a.b.example.org', true],
    ['HTTPS://Shop.Example.org', true],
    ['https://shop.example.org:443', true],
    ['https://example.org', false],
    ['https://evilexample.org', false],
    ['https://shop.example.org.evil.com', false],
    ['https://shop.example.org:8443', false],
    ['http://shop.example.org', false],
    ['http://localhost:3000', true],
    ['http://localhost:3001', false],
    ['null', false],
  ])('matches %s against the configured patterns: %s', async (origin, allowed) => {
    const answer = await preflight('/api/v1/users', origin, 'GET');

    expect(answer.headers['access-control-allow-origin']).toBe(allowed ? origin : undefined);
  });
});

describe('actual requests under /api/**', () => {
  it('echoes an allowed origin with credentials and the exposed headers', async () => {
    const answer = await send('GET', '/api/v1/users?size=1', {
      origin: 'https://app.example.com',
      authorization: ADMIN,
    });

    expect(answer.status).toBe(200);
    expect(corsHeaders(answer)).toEqual({
      'access-control-allow-origin': 'https://app.example.com',
      'access-control-allow-credentials': 'true',
      'access-control-expose-headers': EXPOSED,
    });
    expect(vary(answer)).toContain('Origin');
  });

  it('sends no Access-Control-Allow-Origin to an origin not on the list, but still Vary: Origin', async () => {
    const answer = await send('GET', '/api/v1/users?size=1', {
      origin: 'https://evil.example.com',
      authorization: ADMIN,
    });

    expect(answer.status).toBe(200);
    expect(corsHeaders(answer)).toEqual({});
    expect(vary(answer)).toContain('Origin');
  });

  it('sends Vary: Origin without an Origin too, so caches keep the answers apart', async () => {
    const answer = await send('GET', '/api/v1/users?size=1', { authorization: ADMIN });

    expect(corsHeaders(answer)).toEqual({});
    expect(vary(answer)).toContain('Origin');
  });

  it('puts the same CORS headers on errors: 401, 403, 404, 405, 422', async () => {
    const user = await createUser(app, { password: 'the-password-1' });
    const origin = { origin: 'https://app.example.com' };
    const limited = await bearer({ sub: String(user.id), scope: 'orders:read' });

    const answers = await Promise.all([
      send('GET', '/api/v1/users/1', origin),
      send('GET', `/api/v1/users/${user.id}`, { ...origin, authorization: limited }),
      send('GET', '/api/v1/users/987654321', { ...origin, authorization: ADMIN }),
      send('PUT', '/api/v1/users', { ...origin, authorization: ADMIN }),
      send(
        'POST',
        `/api/v1/users/${user.id}/password-changes`,
        { ...origin, authorization: ADMIN, 'content-type': 'application/json' },
        JSON.stringify({ currentPassword: 'wrong-one', newPassword: 'new-password-1' }),
      ),
    ]);

    expect(answers.map((a) => a.status)).toEqual([401, 403, 404, 405, 422]);
    for (const answer of answers) {
      expect(answer.headers['access-control-allow-origin']).toBe('https://app.example.com');
      expect(answer.headers['access-control-allow-credentials']).toBe('true');
      expect(answer.headers['content-type']).toBe('application/problem+json');
    }
  });
});

describe('a server failure carries CORS headers too', async () => {
  const { app: broken } = await buildTestApp({ CORS_ALLOWED_ORIGINS: ORIGINS });
  await broken.db.destroy();

  it('answers 5xx with the CORS headers of its origin', async () => {
    const answer = await broken.inject({
      method: 'GET',
      url: '/api/v1/users/1',
      headers: { origin: 'https://app.example.com', authorization: ADMIN },
    });

    expect(answer.statusCode, answer.body).toBeGreaterThanOrEqual(500);
    expect(answer.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(answer.headers['access-control-allow-credentials']).toBe('true');
  });
});

describe('/api/public/**', () => {
  it('echoes any origin, without credentials', async () => {
    const answer = await send('GET', '/api/public/health/live', { origin: 'https://anyone.example.net' });

    expect(answer.status).toBe(200);
    expect(corsHeaders(answer)).toEqual({
      'access-control-allow-origin': 'https://anyone.example.net',
      'access-control-expose-headers': EXPOSED,
    });
  });

  it('allows a GET preflight only, with max age 3600', async () => {
    const get = await preflight('/api/public/openapi.json', 'https://anyone.example.net', 'GET');
    const post = await preflight('/api/public/openapi.json', 'https://anyone.example.net', 'POST');

    expect(corsHeaders(get)).toEqual({
      'access-control-allow-origin': 'https://anyone.example.net',
      'access-control-allow-methods': 'GET',
      'access-control-allow-headers': ALLOWED,
      'access-control-max-age': '3600',
    });
    expect(corsHeaders(post)).toEqual({});
  });
});

describe('no configured origin', async () => {
  const { app: closed } = await buildTestApp({ CORS_ALLOWED_ORIGINS: '' });

  it('allows no origin under /api/**', async () => {
    const answer = await closed.inject({
      method: 'OPTIONS',
      url: '/api/v1/users',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET' },
    });

    expect(answer.statusCode).toBe(204);
    expect(Object.keys(answer.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });
});
