// /api/v2/users (spec 2.1 extended create, docs/api-guide.md#versions): age and address, typed problems.
import { describe, expect, it } from 'vitest';
import { aUserRequest, asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const TYPES = 'http://localhost:8080/api/public/problems';
const aV2User = (overrides: Record<string, unknown> = {}) =>
  aUserRequest({ age: 36, address: { street: '12 St James Sq', postalCode: '10115' }, ...overrides });

describe('POST /api/v2/users', () => {
  it('creates a user with age and address', async () => {
    const request = aV2User();

    const response = await api({ method: 'POST', url: '/api/v2/users', payload: request, headers: { host: 'h.test' } });

    expect(response.statusCode).toBe(201);
    const user = response.json();
    expect(user).toEqual({
      id: expect.any(Number),
      name: request.name,
      email: request.email,
      age: 36,
      address: { street: '12 St James Sq', postalCode: '10115' },
      createdAt: expect.any(String),
    });
    expect(response.headers.location).toBe(`http://h.test/api/v2/users/${user.id}`);
    expect(response.body).not.toMatch(/password/i);
  });

  it('validates recursively, in the typed form, with nested field paths', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v2/users',
      payload: aV2User({ age: 17, address: { street: ' ', postalCode: '1234' } }),
    });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: `${TYPES}/validation-failed`,
      title: 'Validation Failed',
      status: 400,
      detail: 'Validation failed',
      instance: '/api/v2/users',
      fieldErrors: [
        { field: 'address.postalCode', message: 'must be a 5-digit postal code' },
        { field: 'address.street', message: 'must not be blank' },
        { field: 'age', message: 'must be greater than or equal to 18' },
      ],
    });
  });

  it.each([
    [{ age: 120 }, 201],
    [{ age: 18 }, 201],
    [{ age: 121 }, 'age: must be less than or equal to 120'],
    [{ age: 30.5 }, 'age: must be an integer'],
    [{ age: '30' }, 'age: must be an integer'],
    [{ age: null }, 'age: must not be null'],
    [{ address: null }, 'address: must not be null'],
    [{ address: 'Main St' }, 'address: must be an object'],
    [{ address: { street: 'Main St', postalCode: 12345 } }, 'address.postalCode: must be a string'],
    [{ address: { street: 'Main St', postalCode: '123456' } }, 'address.postalCode: must be a 5-digit postal code'],
    [{ address: { postalCode: '12345' } }, 'address.street: must not be blank'],
  ])('answers %j with %s', async (overrides, expected) => {
    const response = await api({ method: 'POST', url: '/api/v2/users', payload: aV2User(overrides) });

    if (typeof expected === 'number') expect(response.statusCode).toBe(expected);
    else
      expect(
        response.json().fieldErrors.map((e: { field: string; message: string }) => `${e.field}: ${e.message}`),
      ).toEqual([expected]);
  });

  it('requires age and address', async () => {
    const response = await api({ method: 'POST', url: '/api/v2/users', payload: aUserRequest() });

    expect(response.json().fieldErrors).toEqual([
      { field: 'address', message: 'must not be null' },
      { field: 'age', message: 'must not be null' },
    ]);
  });

  it('answers a duplicate e-mail with the typed conflict', async () => {
    const existing = await createUser(app);

    const response = await api({ method: 'POST', url: '/api/v2/users', payload: aV2User({ email: existing.email }) });

    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      type: `${TYPES}/conflict`,
      title: 'Conflict',
      status: 409,
      detail: 'A user with this email already exists.',
      instance: '/api/v2/users',
      conflictingField: 'email',
    });
  });
});

describe('GET, PUT, PATCH /api/v2/users/{id}', () => {
  it('shows a v1 user with age and address null, and a v2 user to v1 without them', async () => {
    const v1User = await createUser(app);
    const v2User = (await api({ method: 'POST', url: '/api/v2/users', payload: aV2User() })).json();

    const v1AsV2 = await api({ method: 'GET', url: `/api/v2/users/${v1User.id}` });
    const v2AsV1 = await api({ method: 'GET', url: `/api/v1/users/${v2User.id}` });

    expect(v1AsV2.json()).toMatchObject({ id: v1User.id, age: null, address: null });
    expect(Object.keys(v2AsV1.json())).toEqual(['id', 'name', 'email', 'createdAt']);
  });

  it('replaces every field with PUT, which requires them all', async () => {
    const user = (await api({ method: 'POST', url: '/api/v2/users', payload: aV2User() })).json();
    const replacement = {
      name: 'New Name',
      email: `new.${user.id}@example.com`,
      age: 50,
      address: { street: 'Other St 1', postalCode: '54321' },
    };

    const replaced = await api({ method: 'PUT', url: `/api/v2/users/${user.id}`, payload: replacement });
    const partial = await api({
      method: 'PUT',
      url: `/api/v2/users/${user.id}`,
      payload: { name: 'Only Name', email: user.email },
    });

    expect(replaced.statusCode).toBe(200);
    expect(replaced.json()).toEqual({ ...user, ...replacement });
    expect(partial.statusCode).toBe(400);
    expect(partial.json().fieldErrors).toEqual([
      { field: 'address', message: 'must not be null' },
      { field: 'age', message: 'must not be null' },
    ]);
  });

  it('patches age or address alone', async () => {
    const user = (await api({ method: 'POST', url: '/api/v2/users', payload: aV2User() })).json();

    const response = await api({ method: 'PATCH', url: `/api/v2/users/${user.id}`, payload: { age: 40 } });

    expect(response.json()).toEqual({ ...user, age: 40 });
  });

  it('keeps a v2 user’s age and address through a v1 replace', async () => {
    const user = (await api({ method: 'POST', url: '/api/v2/users', payload: aV2User() })).json();

    await api({ method: 'PUT', url: `/api/v1/users/${user.id}`, payload: { name: 'Via V1', email: user.email } });

    expect((await api({ method: 'GET', url: `/api/v2/users/${user.id}` })).json()).toEqual({ ...user, name: 'Via V1' });
  });

  it('answers a missing user and a bad id in the typed form', async () => {
    const missing = await api({ method: 'GET', url: '/api/v2/users/987654321' });
    const bad = await api({ method: 'GET', url: '/api/v2/users/abc' });

    expect(missing.json()).toEqual({
      type: `${TYPES}/entity-not-found`,
      title: 'Entity Not Found',
      status: 404,
      detail: 'User 987654321 not found',
      instance: '/api/v2/users/987654321',
    });
    expect(bad.json()).toMatchObject({
      title: 'Validation Failed',
      fieldErrors: [{ field: 'id', message: 'must be an integer' }],
    });
  });
});
