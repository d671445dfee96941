// spec 9 and docs/api-guide.md#versions through HTTP: version by path, X-API-Version or vendor media type, on
// the same resources, with the same scopes and ownership.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const V1 = 'application/vnd.resource-api.v1+json';
const V2 = 'application/vnd.resource-api.v2+json';
const vary = (headers: Record<string, unknown>) =>
  (typeof headers.vary === 'string' ? headers.vary : '').split(',').map((v) => v.trim());

describe('unversioned paths', () => {
  it('serve v1 when no version is asked for, with Vary: Accept, X-API-Version', async () => {
    const user = await createUser(app);

    const response = await api({ method: 'GET', url: `/api/users/${user.id}` });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(user);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(vary(response.headers)).toEqual(expect.arrayContaining(['Accept', 'X-API-Version']));
  });

  it('serve v2 for X-API-Version: 2, as application/json', async () => {
    const user = await createUser(app);

    const response = await api({ method: 'GET', url: `/api/users/${user.id}`, headers: { 'x-api-version': '2' } });

    expect(response.json()).toEqual({ ...user, age: null, address: null, createdAt: user.createdAt });
    expect(Object.keys(response.json())).toEqual(['id', 'name', 'email', 'age', 'address', 'createdAt']);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('serve the version an Accept vendor type names, with that media type', async () => {
    const user = await createUser(app);

    const v2 = await api({ method: 'GET', url: `/api/users/${user.id}`, headers: { accept: V2 } });
    const v1 = await api({ method: 'GET', url: `/api/users/${user.id}`, headers: { accept: V1 } });

    expect(v2.headers['content-type']).toBe(V2);
    expect(Object.keys(v2.json())).toEqual(['id', 'name', 'email', 'age', 'address', 'createdAt']);
    expect(v1.headers['content-type']).toBe(V1);
    expect(v1.json()).toEqual(user);
  });

  it('answer an unknown version with 400 (header) or 406 (Accept)', async () => {
    const header = await api({ method: 'GET', url: '/api/users/1', headers: { 'x-api-version': '7' } });
    const accept = await api({
      method: 'GET',
      url: '/api/orders',
      headers: { accept: 'application/vnd.resource-api.v7+json' },
    });

    expect(header.statusCode).toBe(400);
    expect(header.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'X-API-Version "7" is not a supported version; supported: 1, 2.',
      instance: '/api/users/1',
    });
    expect(accept.statusCode).toBe(406);
    expect(accept.json()).toMatchObject({ title: 'Not Acceptable', status: 406, instance: '/api/orders' });
    expect(vary(accept.headers)).toEqual(expect.arrayContaining(['Accept', 'X-API-Version']));
  });

  it('answer a header and an Accept that disagree with 406', async () => {
    const response = await api({ method: 'GET', url: '/api/users', headers: { 'x-api-version': '2', accept: V1 } });

    expect(response.statusCode).toBe(406);
  });

  it('build Location and Link from the unversioned URL the client used', async () => {
    const created = await api({
      method: 'POST',
      url: '/api/users',
      headers: { 'x-api-version': '2', host: 'h.test' },
      payload: {
        name: 'Version Two',
        email: `v2.${Date.now()}@example.com`,
        password: 'password-123',
        age: 30,
        address: { street: '1 Main St', postalCode: '12345' },
      },
    });
    const list = await api({ method: 'GET', url: '/api/users?size=1', headers: { host: 'h.test' } });

    expect(created.statusCode).toBe(201);
    expect(created.headers.location).toBe(`http://h.test/api/users/${created.json().id}`);
    expect(list.headers.link).toMatch(/^<http:\/\/h\.test\/api\/users\?size=1&page=0>; rel="first"/);
  });

  it('accept a request body sent as the vendor media type', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/users',
      headers: { 'content-type': V1, accept: V1 },
      payload: JSON.stringify({
        name: 'Vendor Body',
        email: `vendor.${Date.now()}@example.com`,
        password: 'password-123',
      }),
    });

    expect(response.statusCode).toBe(201);
    expect(response.headers['content-type']).toBe(V1);
  });

  it('use the chosen version’s problem form', async () => {
    const v1 = await api({ method: 'POST', url: '/api/users', payload: { name: 'x' } });
    const v2 = await api({
      method: 'POST',
      url: '/api/users',
      headers: { 'x-api-version': '2' },
      payload: { name: 'x' },
    });

    expect(v1.json()).toMatchObject({ title: 'Validation Error', instance: '/api/users' });
    expect(v1.json().errors[0]).toEqual({ field: 'email', message: 'must not be blank', rejected: null });
    expect(v2.json()).toMatchObject({ title: 'Validation Failed', instance: '/api/users' });
    expect(v2.json().fieldErrors).toContainEqual({ field: 'age', message: 'must not be null' });
    expect(v2.headers['content-type']).toBe('application/problem+json');
  });

  it('apply scopes and ownership exactly as the versioned paths do', async () => {
    const me = await aCustomer(app, 'users:read');
    const other = await createUser(app);
    const noScope = await bearer({ sub: String(me.id), scope: 'orders:read' });

    const mine = await app.inject({
      method: 'GET',
      url: `/api/users/${me.id}`,
      headers: { authorization: me.auth, 'x-api-version': '2' },
    });
    const theirs = await app.inject({
      method: 'GET',
      url: `/api/users/${other.id}`,
      headers: { authorization: me.auth, 'x-api-version': '2' },
    });
    const forbidden = await app.inject({
      method: 'GET',
      url: `/api/users/${me.id}`,
      headers: { authorization: noScope },
    });
    const anonymous = await app.inject({ method: 'GET', url: '/api/users/1', headers: { 'x-api-version': '9' } });

    expect(mine.statusCode).toBe(200);
    expect(theirs.statusCode).toBe(404);
    expect(theirs.json().type).toBe('http://localhost:8080/api/public/problems/entity-not-found');
    expect(forbidden.statusCode).toBe(403);
    expect(anonymous.statusCode).toBe(401);
  });
});

describe('versioned paths', () => {
  it('accept a matching X-API-Version or vendor Accept, and answer with the vendor type', async () => {
    const user = await createUser(app);

    const header = await api({ method: 'GET', url: `/api/v2/users/${user.id}`, headers: { 'x-api-version': '2' } });
    const accept = await api({ method: 'GET', url: `/api/v2/users/${user.id}`, headers: { accept: V2 } });

    expect(header.statusCode).toBe(200);
    expect(accept.statusCode).toBe(200);
    expect(accept.headers['content-type']).toBe(V2);
    expect(vary(header.headers)).not.toContain('X-API-Version');
  });

  it('answer a conflicting X-API-Version with 400 and a conflicting vendor Accept with 406', async () => {
    const header = await api({ method: 'GET', url: '/api/v1/users/1', headers: { 'x-api-version': '2' } });
    const accept = await api({ method: 'GET', url: '/api/v1/orders', headers: { accept: V2 } });

    expect(header.statusCode).toBe(400);
    expect(header.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: "X-API-Version 2 conflicts with the path's version v1.",
      instance: '/api/v1/users/1',
    });
    expect(accept.statusCode).toBe(406);
    expect(accept.json().detail).toBe(`Accept asks for ${V2}, but the path is v1.`);
  });

  it('leave products and stock unversioned (spec 9.5)', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/products' });

    expect(response.statusCode).toBe(404);
  });
});
