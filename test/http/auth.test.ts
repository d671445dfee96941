// Authentication, scopes and ownership (spec 5, docs/api-guide.md#authentication-and-scopes) through HTTP.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, type CryptoKey } from 'jose';
import Fastify from 'fastify';
import { afterAll, describe, expect, it, vi } from 'vitest';
import auth from '../../src/http/auth/auth.js';
import requestContext from '../../src/http/request-context.js';
import { asAdmin, createUser } from '../support/factories.js';
import { buildTestApp, TEST_JWT_SECRET } from '../support/test-app.js';
import { ALL_SCOPES, bearer, token } from '../support/tokens.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const get = (url: string, authorization?: string) =>
  app.inject({ method: 'GET', url, headers: authorization ? { authorization } : {} });

async function signed(
  key: CryptoKey | Uint8Array,
  alg: string,
  claims: { sub?: string; exp?: number; scope?: string; kid?: string } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  let jwt = new SignJWT({ scope: claims.scope ?? ALL_SCOPES })
    .setProtectedHeader({ alg, ...(claims.kid ? { kid: claims.kid } : {}) })
    .setIssuedAt(now);
  if (claims.sub !== '') jwt = jwt.setSubject(claims.sub ?? '1');
  if (claims.exp !== 0) jwt = jwt.setExpirationTime(claims.exp ?? now + 600);
  return jwt.sign(key);
}

describe('authentication', () => {
  it('answers a request without a token with 401, a problem and WWW-Authenticate: Bearer', async () => {
    const response = await get('/api/v1/users/1');

    expect(response.statusCode).toBe(401);
    expect(response.headers['www-authenticate']).toBe('Bearer');
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Unauthorized',
      status: 401,
      detail: 'A Bearer access token is required.',
      instance: '/api/v1/users/1',
    });
  });

  it('answers 401, not 404 or 405, for paths that do not exist', async () => {
    const unknown = await get('/api/v1/secret-admin-panel');
    const wrongMethod = await app.inject({ method: 'PUT', url: '/api/v1/users' });
    const outsideApi = await get('/anything');

    expect([unknown.statusCode, wrongMethod.statusCode, outsideApi.statusCode]).toEqual([401, 401, 401]);
  });

  it('answers an authenticated request to an unknown path with 404', async () => {
    expect((await get('/api/v1/secret-admin-panel', await bearer({ scope: ALL_SCOPES }))).statusCode).toBe(404);
  });

  it('treats another scheme as no token', async () => {
    const response = await get('/api/v1/users/1', 'Basic dXNlcjpwYXNz');

    expect(response.statusCode).toBe(401);
    expect(response.headers['www-authenticate']).toBe('Bearer');
  });

  it.each([
    ['a bad signature', async () => bearer({ secret: 'another-secret-that-is-at-least-32-chars' })],
    ['garbage', async () => 'Bearer not.a.jwt'],
    [
      'alg none',
      async () =>
        `Bearer ${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: '1', exp: 9999999999, scope: ALL_SCOPES })).toString('base64url')}.`,
    ],
    ['no exp', async () => `Bearer ${await signed(new TextEncoder().encode(TEST_JWT_SECRET), 'HS256', { exp: 0 })}`],
    ['no sub', async () => `Bearer ${await signed(new TextEncoder().encode(TEST_JWT_SECRET), 'HS256', { sub: '' })}`],
  ])('rejects %s with 401 invalid_token', async (_name, make) => {
    const response = await get('/api/v1/users/1', await make());

    expect(response.statusCode).toBe(401);
    expect(response.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(response.json()).toMatchObject({
      title: 'Unauthorized',
      status: 401,
      detail: 'The access token is invalid.',
    });
  });

  it('rejects an expired token, and tolerates a little clock skew', async () => {
    const expired = await get('/api/v1/users/1', await bearer({ sub: '1', scope: ALL_SCOPES, expiresIn: -120 }));
    const justExpired = await createUser(app).then(async (u) =>
      get(`/api/v1/users/${u.id}`, await bearer({ sub: String(u.id), scope: ALL_SCOPES, expiresIn: -10 })),
    );

    expect(expired.statusCode).toBe(401);
    expect(expired.json().detail).toBe('The access token has expired.');
    expect(expired.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(justExpired.statusCode).toBe(200);
  });

  it('accepts the scp claim as an array', async () => {
    const user = await createUser(app);

    const response = await get(
      `/api/v1/users/${user.id}`,
      `Bearer ${await token({ sub: String(user.id), claims: { scp: ['users:read'] } })}`,
    );

    expect(response.statusCode).toBe(200);
  });

  it('verifies the same token on every request (a cached token still carries its own identity)', async () => {
    const a = await createUser(app);
    const b = await createUser(app);
    const tokenA = await bearer({ sub: String(a.id), scope: 'users:read' });
    const tokenB = await bearer({ sub: String(b.id), scope: 'users:read' });

    const results = await Promise.all([
      get(`/api/v1/users/${a.id}`, tokenA),
      get(`/api/v1/users/${a.id}`, tokenA),
      get(`/api/v1/users/${a.id}`, tokenB),
      get(`/api/v1/users/${b.id}`, tokenB),
    ]);

    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 404, 200]);
  });

  it('reads a header with a token seen before as strictly as the first time', async () => {
    const user = await createUser(app);
    const header = await bearer({ sub: String(user.id), scope: 'users:read' });
    const jwt = header.slice('Bearer '.length);
    const url = `/api/v1/users/${user.id}`;
    expect((await get(url, header)).statusCode).toBe(200); // verified, and now cached

    // The scheme in any case and spaces around the token, as on a first sight; a token that
    // merely starts with the cached one, or carries more after a space, is not the cached one.
    const answers = await Promise.all(
      [`bearer ${jwt}`, `Bearer   ${jwt}  `, `Bearer ${jwt}x`, `Bearer ${jwt} extra`, `Bearer ${jwt},`].map(
        async (h) => (await get(url, h)).statusCode,
      ),
    );
    expect(answers).toEqual([200, 200, 401, 401, 401]);
  });

  it('never asks for a token on /api/public/** or on OPTIONS', async () => {
    expect((await get('/api/public/health/live')).statusCode).toBe(200);
    expect((await get('/api/public/openapi.json')).statusCode).toBe(200);
    const options = await app.inject({ method: 'OPTIONS', url: '/api/v1/users' });
    expect(options.statusCode).toBe(204);
    expect(options.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
  });
});

describe('scopes', () => {
  it('answers a caller without the route scope with 403 and an insufficient_scope challenge', async () => {
    const user = await createUser(app);

    const response = await get(
      `/api/v1/users/${user.id}`,
      await bearer({ sub: String(user.id), scope: 'orders:read' }),
    );

    expect(response.statusCode).toBe(403);
    expect(response.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="users:read"');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Forbidden',
      status: 403,
      detail: 'This request needs the users:read scope.',
      instance: `/api/v1/users/${user.id}`,
    });
  });

  it('needs users:write for every method but GET', async () => {
    const user = await createUser(app);
    const readOnly = await bearer({ sub: String(user.id), scope: 'users:read' });

    const responses = await Promise.all([
      app.inject({
        method: 'PUT',
        url: `/api/v1/users/${user.id}`,
        headers: { authorization: readOnly },
        payload: { name: 'New Name', email: user.email },
      }),
      app.inject({
        method: 'PATCH',
        url: `/api/v1/users/${user.id}`,
        headers: { authorization: readOnly },
        payload: { name: 'New Name' },
      }),
      app.inject({ method: 'DELETE', url: `/api/v1/users/${user.id}`, headers: { authorization: readOnly } }),
      app.inject({
        method: 'POST',
        url: `/api/v1/users/${user.id}/password-resets`,
        headers: { authorization: readOnly },
      }),
      app.inject({
        method: 'POST',
        url: `/api/v1/users/${user.id}/password-changes`,
        headers: { authorization: readOnly },
        payload: { currentPassword: 'x', newPassword: 'yyyyyyyy' },
      }),
    ]);

    for (const r of responses) {
      expect(r.statusCode).toBe(403);
      expect(r.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="users:write"');
    }
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).json()).toEqual(user);
  });

  it('fails start-up when a route declares no scope', async () => {
    const bare = Fastify();
    bare.decorate('config', app.config);
    await bare.register(requestContext);
    await bare.register(auth);

    const adding = async () => {
      bare.get('/api/v1/unscoped', async () => 'x');
      await bare.ready();
    };

    await expect(adding()).rejects.toThrow(
      'GET /api/v1/unscoped declares no scope (route config.scope, docs/api-guide.md#authentication-and-scopes)',
    );
    bare.get('/api/public/fine', async () => 'x');
    bare.get('/api/v1/scoped', { config: { scope: 'users:read' } }, async () => 'x');
  });
});

describe('ownership (OWASP API1)', () => {
  it('lets a caller without admin reach its own user through every route', async () => {
    const me = await createUser(app, { password: 'my-password-1' });
    const auth = await bearer({ sub: String(me.id), scope: 'users:read users:write' });
    const as = (method: 'GET' | 'PUT' | 'PATCH' | 'POST', url: string, payload?: object) =>
      app.inject({ method, url, headers: { authorization: auth }, ...(payload ? { payload } : {}) });

    expect((await as('GET', `/api/v1/users/${me.id}`)).statusCode).toBe(200);
    expect((await as('PUT', `/api/v1/users/${me.id}`, { name: 'Me Myself', email: me.email })).statusCode).toBe(200);
    expect((await as('PATCH', `/api/v1/users/${me.id}`, { name: 'Me Again' })).statusCode).toBe(200);
    expect(
      (
        await as('POST', `/api/v1/users/${me.id}/password-changes`, {
          currentPassword: 'my-password-1',
          newPassword: 'my-password-2',
        })
      ).statusCode,
    ).toBe(204);
    expect((await as('POST', `/api/v1/users/${me.id}/password-resets`)).statusCode).toBe(202);
  });

  it('answers every route with another user id exactly as for a missing user', async () => {
    const me = await createUser(app);
    const other = await createUser(app);
    const auth = await bearer({ sub: String(me.id), scope: 'users:read users:write' });
    const missingId = 987654321;
    const call = (method: 'GET' | 'PUT' | 'PATCH' | 'POST', path: string, id: number, payload?: object) =>
      app.inject({
        method,
        url: `/api/v1/users/${id}${path}`,
        headers: { authorization: auth },
        ...(payload ? { payload } : {}),
      });
    const cases = [
      ['GET', ''],
      ['PUT', '', { name: 'Intruder', email: 'intruder@example.com' }],
      ['PATCH', '', { name: 'Intruder' }],
      ['POST', '/password-changes', { currentPassword: 'whatever', newPassword: 'whatever-else' }],
      ['POST', '/password-resets'],
    ] as const;

    for (const [method, path, payload] of cases) {
      const theirs = await call(method, path, other.id, payload);
      const missing = await call(method, path, missingId, payload);
      expect(theirs.statusCode, `${method} ${path}`).toBe(404);
      expect(theirs.json(), `${method} ${path}`).toEqual({
        ...missing.json(),
        detail: `User ${other.id} not found`,
        instance: `/api/v1/users/${other.id}${path}`,
      });
    }
    expect((await api({ method: 'GET', url: `/api/v1/users/${other.id}` })).json()).toEqual(other);
  });

  it('answers DELETE of another user with 204, as for a missing one, and deletes nothing', async () => {
    const me = await createUser(app);
    const other = await createUser(app);

    const response = await app.inject({
      method: 'DELETE',
      url: `/api/v1/users/${other.id}`,
      headers: { authorization: await bearer({ sub: String(me.id), scope: 'users:write' }) },
    });

    expect(response.statusCode).toBe(204);
    expect((await api({ method: 'GET', url: `/api/v1/users/${other.id}` })).statusCode).toBe(200);
  });

  it('needs admin to list or create users', async () => {
    const me = await createUser(app);
    const auth = await bearer({ sub: String(me.id), scope: 'users:read users:write' });

    const list = await app.inject({ method: 'GET', url: '/api/v1/users', headers: { authorization: auth } });
    const create = await app.inject({
      method: 'POST',
      url: '/api/v1/users',
      headers: { authorization: auth },
      payload: { name: 'New One', email: 'new.one@example.com', password: 'password-123' },
    });

    expect(list.statusCode).toBe(403);
    expect(list.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="admin"');
    expect(list.json()).toEqual({
      type: 'about:blank',
      title: 'Forbidden',
      status: 403,
      detail: 'Listing users needs the admin scope.',
      instance: '/api/v1/users',
    });
    expect(create.statusCode).toBe(403);
    expect(create.json().detail).toBe('Creating a user needs the admin scope.');
  });
});

describe('issuer and audience', async () => {
  const strict = (await buildTestApp({ JWT_ISSUER: 'https://idp.example.com', JWT_AUDIENCE: 'resource-api' })).app;

  it('enforces iss and aud when configured', async () => {
    const good = await bearer({
      scope: ALL_SCOPES,
      sub: '1',
      issuer: 'https://idp.example.com',
      audience: 'resource-api',
    });
    const wrongIssuer = await bearer({
      scope: ALL_SCOPES,
      sub: '1',
      issuer: 'https://evil.example.com',
      audience: 'resource-api',
    });
    const noAudience = await bearer({ scope: ALL_SCOPES, sub: '1', issuer: 'https://idp.example.com' });

    const status = async (auth: string) =>
      (await strict.inject({ method: 'GET', url: '/api/v1/users/1', headers: { authorization: auth } })).statusCode;

    expect(await status(good)).toBe(404);
    expect(await status(wrongIssuer)).toBe(401);
    expect(await status(noAudience)).toBe(401);
  });
});

describe('public keys', async () => {
  const rsa = await generateKeyPair('RS256', { extractable: true });
  const ec = await generateKeyPair('ES256', { extractable: true });
  const rsaApp = (await buildTestApp({ JWT_SECRET: '', JWT_PUBLIC_KEY: await exportSPKI(rsa.publicKey) })).app;
  const ecApp = (await buildTestApp({ JWT_SECRET: '', JWT_PUBLIC_KEY: await exportSPKI(ec.publicKey) })).app;
  const status = async (target: typeof app, jwt: string) =>
    (await target.inject({ method: 'GET', url: '/api/v1/users/42', headers: { authorization: `Bearer ${jwt}` } }))
      .statusCode;

  it('verifies RS256 with an RSA key and ES256 with an EC key', async () => {
    expect(await status(rsaApp, await signed(rsa.privateKey, 'RS256', { sub: '42' }))).toBe(404);
    expect(await status(ecApp, await signed(ec.privateKey, 'ES256', { sub: '42' }))).toBe(404);
    expect(await status(rsaApp, await signed(ec.privateKey, 'ES256', { sub: '42' }))).toBe(401);
  });

  it('refuses HS256 signed with the public key as a secret (algorithm confusion)', async () => {
    const pem = await exportSPKI(rsa.publicKey);

    expect(await status(rsaApp, await signed(new TextEncoder().encode(pem), 'HS256', { sub: '42' }))).toBe(401);
  });
});

describe('JWKS', async () => {
  const first = await generateKeyPair('RS256', { extractable: true });
  const second = await generateKeyPair('ES256', { extractable: true });
  let keys = [{ ...(await exportJWK(first.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }];
  let fetches = 0;
  const server = createServer((_req, res) => {
    fetches++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
  const { app: jwksApp } = await buildTestApp({ JWT_SECRET: '', JWT_JWKS_URL: url });
  const status = async (jwt: string) =>
    (await jwksApp.inject({ method: 'GET', url: '/api/v1/users/42', headers: { authorization: `Bearer ${jwt}` } }))
      .statusCode;

  it('verifies with the provider keys and picks up a rotated key on an unknown kid', async () => {
    expect(await status(await signed(first.privateKey, 'RS256', { sub: '42', kid: 'k1' }))).toBe(404);
    expect(await status(await signed(first.privateKey, 'RS256', { sub: '42', kid: 'k1', scope: 'users:read' }))).toBe(
      404,
    );
    expect(fetches).toBe(1);

    keys = [{ ...(await exportJWK(second.publicKey)), kid: 'k2', alg: 'ES256', use: 'sig' }];
    await new Promise((r) => setTimeout(r, 1100)); // past the test app's 1 s cooldown

    expect(await status(await signed(second.privateKey, 'ES256', { sub: '42', kid: 'k2' }))).toBe(404);
    expect(fetches).toBe(2);
    expect(
      await status(await signed(first.privateKey, 'RS256', { sub: '42', kid: 'k1', scope: 'products:read' })),
    ).toBe(401);
  });
});

describe('a key the provider withdraws', async () => {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  let keys = [{ ...(await exportJWK(publicKey)), kid: 'gone', alg: 'RS256', use: 'sig' }];
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
  const { app: withdrawing } = await buildTestApp(
    { JWT_SECRET: '', JWT_JWKS_URL: url },
    { auth: { jwksCooldownMs: 100, keyCacheMaxAgeMs: 500 } },
  );

  it('stops being accepted once the caches age out, though the token has not expired', async () => {
    const jwt = await signed(privateKey, 'RS256', { sub: '42', kid: 'gone' });
    const status = async () =>
      (
        await withdrawing.inject({
          method: 'GET',
          url: '/api/v1/users/42',
          headers: { authorization: `Bearer ${jwt}` },
        })
      ).statusCode;
    // The clock stands still but for the step below: a slow host (a first request of a fresh
    // process, a busy CI runner) cannot age the 500 ms caches between the two first requests.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    try {
      const accepted = await status(); // verified: the route answers (no user 42)
      expect(accepted).toBe(404);
      keys = [];
      expect(await status()).toBe(accepted); // still trusted from the caches
      vi.setSystemTime(Date.now() + 1100); // past both caches' age (and twice it)
      expect(await status()).toBe(401);
    } finally {
      vi.useRealTimers();
    }
  });
});
