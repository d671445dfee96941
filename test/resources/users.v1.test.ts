import { describe, expect, it } from 'vitest';
import { aUserRequest, asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const json = { 'content-type': 'application/json' };

describe('POST /api/v1/users', () => {
  it('creates a user and returns 201 with an absolute Location built from the request', async () => {
    const request = aUserRequest();

    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: request,
      headers: { host: 'api.example.test:8443' },
    });

    expect(response.statusCode).toBe(201);
    const user = response.json();
    expect(user).toEqual({
      id: expect.any(Number),
      name: request.name,
      email: request.email,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$/),
    });
    expect(Object.keys(user)).toEqual(['id', 'name', 'email', 'createdAt']);
    expect(response.headers.location).toBe(`http://api.example.test:8443/api/v1/users/${user.id}`);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(response.headers['cache-control']).toBe('no-store');
    const followUp = await api({ method: 'GET', url: response.headers.location });
    expect(followUp.json()).toEqual(user);
  });

  it('keeps createdAt as the UTC wall clock without a zone', async () => {
    const before = new Date();

    const user = await createUser(app);

    const created = new Date(`${user.createdAt}Z`).getTime();
    expect(created).toBeGreaterThanOrEqual(before.getTime() - 2000);
    expect(created).toBeLessThanOrEqual(Date.now() + 2000);
  });

  it('never returns the password or its hash', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ password: 'a-very-secret-pass' }),
    });

    expect(response.body).not.toMatch(/password|a-very-secret-pass|argon2/i);
  });

  it('stores the password as argon2id at OWASP parameters, salted per user', async () => {
    const a = await createUser(app, { password: 'same-password-1' });
    const b = await createUser(app, { password: 'same-password-1' });

    const rows = await app.db
      .selectFrom('users')
      .select(['id', 'password_hash'])
      .where('id', 'in', [a.id, b.id])
      .execute();

    for (const row of rows)
      expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    expect(rows[0]!.password_hash).not.toBe(rows[1]!.password_hash);
    expect(rows[0]!.password_hash).not.toContain('same-password-1');
  });

  it('ignores unknown members (spec 9.3)', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ role: 'admin', id: 999999, passwordHash: 'x' }),
    });

    expect(response.statusCode).toBe(201);
    expect(Object.keys(response.json())).toEqual(['id', 'name', 'email', 'createdAt']);
    expect(response.json().id).not.toBe(999999);
  });

  it('returns 400 listing every violated rule with Bean Validation messages, sorted by field then message', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: '', email: 'not-an-email', password: 'short' },
    });

    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Validation Error',
      status: 400,
      detail: 'Validation failed',
      instance: '/api/v1/users',
      errors: [
        { field: 'email', message: 'must be a well-formed email address', rejected: 'not-an-email' },
        { field: 'name', message: 'must not be blank', rejected: '' },
        { field: 'name', message: 'size must be between 2 and 100', rejected: '' },
        { field: 'password', message: 'size must be between 8 and 72', rejected: null },
      ],
    });
  });

  it('reports missing and null fields as blank', async () => {
    const response = await api({ method: 'POST', url: '/api/v1/users', payload: { name: null } });

    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual([
      { field: 'email', message: 'must not be blank', rejected: null },
      { field: 'name', message: 'must not be blank', rejected: null },
      { field: 'password', message: 'must not be blank', rejected: null },
    ]);
  });

  it('treats an empty body as one with every field missing', async () => {
    const response = await api({ method: 'POST', url: '/api/v1/users', headers: json, payload: '' });

    expect(response.statusCode).toBe(400);
    expect(response.json().errors.map((e: { field: string }) => e.field)).toEqual(['email', 'name', 'password']);
  });

  it('does not apply the e-mail format rule to an empty string, but does to white space (Hibernate)', async () => {
    const empty = await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest({ email: '' }) });
    const spaces = await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest({ email: '   ' }) });

    expect(empty.json().errors).toEqual([{ field: 'email', message: 'must not be blank', rejected: '' }]);
    expect(spaces.json().errors).toEqual([
      { field: 'email', message: 'must be a well-formed email address', rejected: '   ' },
      { field: 'email', message: 'must not be blank', rejected: '   ' },
    ]);
  });

  it('checks lengths at their bounds', async () => {
    const tooLong = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ name: 'x'.repeat(101), password: 'p'.repeat(73) }),
    });
    const atBounds = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ name: 'xy', password: 'p'.repeat(72) }),
    });
    const longest = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ name: 'x'.repeat(100), password: 'p'.repeat(8) }),
    });

    expect(tooLong.json().errors).toEqual([
      { field: 'name', message: 'size must be between 2 and 100', rejected: 'x'.repeat(101) },
      { field: 'password', message: 'size must be between 8 and 72', rejected: null },
    ]);
    expect(atBounds.statusCode).toBe(201);
    expect(longest.statusCode).toBe(201);
  });

  it('rejects values of the wrong JSON type without coercing them', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: 12345, email: ['a@b.c'], password: true },
    });

    expect(response.json().errors).toEqual([
      { field: 'email', message: 'must be a string', rejected: '["a@b.c"]' },
      { field: 'name', message: 'must be a string', rejected: '12345' },
      { field: 'password', message: 'must be a string', rejected: null },
    ]);
  });

  it('answers a body that is not a JSON object with 400', async () => {
    const response = await api({ method: 'POST', url: '/api/v1/users', headers: json, payload: '[1,2]' });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'The request body must be a JSON object.',
      instance: '/api/v1/users',
    });
  });

  it('returns 409 with conflictingField for a duplicate e-mail, ignoring case', async () => {
    const first = await createUser(app);

    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ email: first.email.toUpperCase() }),
    });

    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Conflict',
      status: 409,
      detail: 'A user with this email already exists.',
      instance: '/api/v1/users',
      conflictingField: 'email',
    });
  });

  it('creates exactly one user when the same e-mail is posted concurrently', async () => {
    const request = aUserRequest();

    const responses = await Promise.all(
      Array.from({ length: 8 }, () => api({ method: 'POST', url: '/api/v1/users', payload: request })),
    );

    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
  });
});

describe('GET /api/v1/users/{id}', () => {
  it('returns the user', async () => {
    const user = await createUser(app);

    const response = await api({ method: 'GET', url: `/api/v1/users/${user.id}` });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(user);
  });

  it('returns the typed entity-not-found problem for a missing user', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users/987654321' });

    expect(response.statusCode).toBe(404);
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.json()).toEqual({
      type: 'http://localhost:8080/api/public/problems/entity-not-found',
      title: 'Entity Not Found',
      status: 404,
      detail: 'User 987654321 not found',
      instance: '/api/v1/users/987654321',
    });
  });

  it.each([
    ['abc', 'must be an integer', 'abc'],
    ['1.5', 'must be an integer', '1.5'],
    ['0', 'must be greater than or equal to 1', '0'],
    ['99999999999999999999', 'must be less than or equal to 9007199254740991', '99999999999999999999'], // docs/api-guide.md#limits-and-time-outs: as sent, never rounded
  ])('returns 400 in the users form for the id %s', async (id, message, rejected) => {
    const response = await api({ method: 'GET', url: `/api/v1/users/${id}` });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Validation Error',
      status: 400,
      detail: 'Validation failed',
      instance: `/api/v1/users/${id}`,
      errors: [{ field: 'id', message, rejected }],
    });
  });
});

describe('GET /api/v1/users', () => {
  // This file's database holds users from other tests too; each test reads only what it can know.
  it('returns the page envelope with defaults page 0, size 20, sort id', async () => {
    await createUser(app);

    const response = await api({ method: 'GET', url: '/api/v1/users' });

    expect(response.statusCode).toBe(200);
    const page = response.json();
    expect(Object.keys(page)).toEqual(['content', 'totalElements', 'totalPages', 'number', 'size', 'first', 'last']);
    expect(page).toMatchObject({ number: 0, size: 20, first: true });
    expect(page.totalPages).toBe(Math.ceil(page.totalElements / 20));
    expect(page.last).toBe(page.totalPages <= 1);
    const ids = page.content.map((u: { id: number }) => u.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(response.headers['x-total-count']).toBe(String(page.totalElements));
  });

  it('pages, with X-Total-Count and a Link header that keeps size and sort', async () => {
    for (let i = 0; i < 5; i++) await createUser(app);
    const total = (await api({ method: 'GET', url: '/api/v1/users?size=1' })).json().totalElements as number;

    const response = await api({
      method: 'GET',
      url: '/api/v1/users?page=1&size=2&sort=name,desc',
      headers: { host: 'h.test' },
    });

    const page = response.json();
    expect(page).toMatchObject({
      number: 1,
      size: 2,
      first: false,
      totalElements: total,
      totalPages: Math.ceil(total / 2),
      last: total <= 4,
    });
    expect(page.content).toHaveLength(2);
    const lastPage = Math.ceil(total / 2) - 1;
    // prev and next carry a cursor (test/lists/list-cursors.test.ts follows them).
    expect(String(response.headers.link).replace(/&cursor=[\w-]+\.[\w-]{22}>/g, '&cursor=…>')).toBe(
      [
        '<http://h.test/api/v1/users?page=0&size=2&sort=name%2Cdesc>; rel="first"',
        '<http://h.test/api/v1/users?page=0&size=2&sort=name%2Cdesc&cursor=…>; rel="prev"',
        ...(lastPage > 1 ? ['<http://h.test/api/v1/users?page=2&size=2&sort=name%2Cdesc&cursor=…>; rel="next"'] : []),
        `<http://h.test/api/v1/users?page=${lastPage}&size=2&sort=name%2Cdesc>; rel="last"`,
      ].join(', '),
    );
  });

  it('sorts by each field in both directions, ties broken by id', async () => {
    await createUser(app, { name: 'Zed Same' });
    await createUser(app, { name: 'Zed Same' });

    for (const [sort, key] of [
      ['name', 'name'],
      ['email', 'email'],
      ['createdAt', 'createdAt'],
      ['id', 'id'],
    ] as const) {
      for (const dir of ['asc', 'desc'] as const) {
        const page = (await api({ method: 'GET', url: `/api/v1/users?size=100&sort=${sort},${dir}` })).json();
        const rows = page.content as Record<string, string | number>[];
        for (let i = 1; i < rows.length; i++) {
          const a = rows[i - 1]!;
          const b = rows[i]!;
          const cmp = a[key]! < b[key]! ? -1 : a[key]! > b[key]! ? 1 : 0;
          if (key !== 'name') expect(dir === 'asc' ? cmp : -cmp, `${sort},${dir}`).toBeLessThanOrEqual(0);
          if (a[key] === b[key]) expect(a.id! < b.id!, `tie on ${sort},${dir}`).toBe(true);
        }
      }
    }
    const byName = (await api({ method: 'GET', url: '/api/v1/users?size=100&sort=name,desc' })).json().content as {
      name: string;
      id: number;
    }[];
    const zeds = byName.filter((u) => u.name === 'Zed Same');
    expect(zeds[0]!.id).toBeLessThan(zeds[1]!.id);
  });

  it('clamps size above 100 to 100', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users?size=500' });

    expect(response.statusCode).toBe(200);
    expect(response.json().size).toBe(100);
  });

  it('returns an empty last page past the end, with the true total', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users?page=100000&size=100' });

    const page = response.json();
    expect(page.content).toEqual([]);
    expect(page.totalElements).toBeGreaterThan(0);
    expect(page.last).toBe(true);
  });

  it('returns 400 in the users form for bad paging and sort values', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users?page=-1&size=0&sort=password' });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Validation Error',
      status: 400,
      detail: 'Validation failed',
      instance: '/api/v1/users',
      errors: [
        { field: 'page', message: 'must be greater than or equal to 0', rejected: '-1' },
        { field: 'size', message: 'must be greater than or equal to 1', rejected: '0' },
        {
          field: 'sort',
          message: 'must be one of id, name, email, createdAt, optionally followed by ,asc or ,desc',
          rejected: 'password',
        },
      ],
    });
  });

  it('returns 400 for a non-numeric page', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users?page=two' });

    expect(response.json().errors).toEqual([{ field: 'page', message: 'must be an integer', rejected: 'two' }]);
  });
});

describe('PUT /api/v1/users/{id}', () => {
  it('replaces name and email', async () => {
    const user = await createUser(app);
    const replacement = { name: 'Replaced Name', email: `replaced.${user.id}@example.com` };

    const response = await api({ method: 'PUT', url: `/api/v1/users/${user.id}`, payload: replacement });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ ...user, ...replacement });
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).json()).toEqual({ ...user, ...replacement });
  });

  it('requires every field (an omitted field is not "absent")', async () => {
    const user = await createUser(app);

    const response = await api({ method: 'PUT', url: `/api/v1/users/${user.id}`, payload: { name: 'Only Name' } });

    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual([{ field: 'email', message: 'must not be blank', rejected: null }]);
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).json()).toEqual(user);
  });

  it('returns 404 for a missing user', async () => {
    const response = await api({
      method: 'PUT',
      url: '/api/v1/users/987654321',
      payload: { name: 'Somebody', email: 'somebody@example.com' },
    });

    expect(response.statusCode).toBe(404);
    expect(response.json().title).toBe('Entity Not Found');
  });

  it('returns 409 when the new e-mail belongs to another user', async () => {
    const a = await createUser(app);
    const b = await createUser(app);

    const response = await api({
      method: 'PUT',
      url: `/api/v1/users/${b.id}`,
      payload: { name: b.name, email: a.email },
    });

    expect(response.statusCode).toBe(409);
    expect(response.json().conflictingField).toBe('email');
  });
});

describe('PATCH /api/v1/users/{id}', () => {
  it('changes only the members sent', async () => {
    const user = await createUser(app);

    const response = await api({ method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'Patched' } });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ ...user, name: 'Patched' });
  });

  it('accepts application/merge-patch+json', async () => {
    const user = await createUser(app);

    const response = await api({
      method: 'PATCH',
      url: `/api/v1/users/${user.id}`,
      headers: { 'content-type': 'application/merge-patch+json' },
      payload: JSON.stringify({ email: `merge.${user.id}@example.com` }),
    });

    expect(response.statusCode).toBe(200);
    expect(response.json().email).toBe(`merge.${user.id}@example.com`);
  });

  it('ignores members that cannot be patched', async () => {
    const user = await createUser(app);

    const response = await api({
      method: 'PATCH',
      url: `/api/v1/users/${user.id}`,
      payload: { password: 'new-password-1', createdAt: '2000-01-01T00:00:00.000', id: 1 },
    });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(user);
  });

  it('validates the members sent as on create', async () => {
    const user = await createUser(app);

    const response = await api({
      method: 'PATCH',
      url: `/api/v1/users/${user.id}`,
      payload: { name: 'x', email: 'bad' },
    });

    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual([
      { field: 'email', message: 'must be a well-formed email address', rejected: 'bad' },
      { field: 'name', message: 'size must be between 2 and 100', rejected: 'x' },
    ]);
  });

  it('returns 404 for a missing user', async () => {
    const response = await api({ method: 'PATCH', url: '/api/v1/users/987654321', payload: { name: 'Nobody' } });

    expect(response.statusCode).toBe(404);
  });

  it('returns 409 for an e-mail taken by another user', async () => {
    const a = await createUser(app);
    const b = await createUser(app);

    const response = await api({
      method: 'PATCH',
      url: `/api/v1/users/${b.id}`,
      payload: { email: a.email.toUpperCase() },
    });

    expect(response.statusCode).toBe(409);
    expect(response.json().conflictingField).toBe('email');
  });
});

describe('DELETE /api/v1/users/{id}', () => {
  it('returns 204 with no body, and 204 again when the user is already gone', async () => {
    const user = await createUser(app);

    const first = await api({ method: 'DELETE', url: `/api/v1/users/${user.id}` });
    const second = await api({ method: 'DELETE', url: `/api/v1/users/${user.id}` });

    expect(first.statusCode).toBe(204);
    expect(first.body).toBe('');
    expect(second.statusCode).toBe(204);
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).statusCode).toBe(404);
  });
});

describe('POST /api/v1/users/{id}/password-changes', () => {
  it('changes the password with the current one, and then needs the new one', async () => {
    const user = await createUser(app, { password: 'first-password' });

    const changed = await api({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-changes`,
      payload: { currentPassword: 'first-password', newPassword: 'second-password' },
    });
    const withOld = await api({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-changes`,
      payload: { currentPassword: 'first-password', newPassword: 'third-password' },
    });
    const withNew = await api({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-changes`,
      payload: { currentPassword: 'second-password', newPassword: 'third-password' },
    });

    expect(changed.statusCode).toBe(204);
    expect(changed.body).toBe('');
    expect(withOld.statusCode).toBe(422);
    expect(withOld.json()).toEqual({
      type: 'http://localhost:8080/api/public/problems/business-rule-violation',
      title: 'Business Rule Violation',
      status: 422,
      detail: 'The current password is incorrect.',
      instance: `/api/v1/users/${user.id}/password-changes`,
    });
    expect(withNew.statusCode).toBe(204);
  });

  it('validates in the users form and never echoes a password', async () => {
    const user = await createUser(app);

    const response = await api({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-changes`,
      payload: { currentPassword: ' ', newPassword: 'short' },
    });

    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual([
      { field: 'currentPassword', message: 'must not be blank', rejected: null },
      { field: 'newPassword', message: 'size must be between 8 and 72', rejected: null },
    ]);
  });

  it('returns 404 for a missing user', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users/987654321/password-changes',
      payload: { currentPassword: 'whatever1', newPassword: 'whatever2' },
    });

    expect(response.statusCode).toBe(404);
  });
});

describe('POST /api/v1/users/{id}/password-resets', () => {
  it('accepts a reset request with 202 and no body, keeping only a hash of the token with a one-hour expiry', async () => {
    const user = await createUser(app);

    const response = await api({ method: 'POST', url: `/api/v1/users/${user.id}/password-resets` });

    expect(response.statusCode).toBe(202);
    expect(response.body).toBe('');
    const resets = await app.db.selectFrom('password_resets').selectAll().where('user_id', '=', user.id).execute();
    expect(resets).toHaveLength(1);
    expect(resets[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    const ttl = resets[0]!.expires_at.getTime() - resets[0]!.created_at.getTime();
    expect(ttl).toBeGreaterThan(59 * 60 * 1000);
    expect(ttl).toBeLessThan(61 * 60 * 1000);
  });

  it('returns 404 for a missing user', async () => {
    const response = await api({ method: 'POST', url: '/api/v1/users/987654321/password-resets' });

    expect(response.statusCode).toBe(404);
  });
});

describe('Location behind a proxy', async () => {
  const proxied = (await buildTestApp({ TRUST_PROXY: 'true' })).app;
  const proxiedApi = asAdmin(proxied);

  it('uses X-Forwarded-Proto, -Host, -Port and -Prefix when TRUST_PROXY is on', async () => {
    const response = await proxiedApi({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest(),
      headers: {
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'api.example.com',
        'x-forwarded-port': '8443',
        'x-forwarded-prefix': '/shop/',
      },
    });

    expect(response.headers.location).toBe(`https://api.example.com:8443/shop/api/v1/users/${response.json().id}`);
  });

  it('drops the default port of the scheme', async () => {
    const response = await proxiedApi({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest(),
      headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com:443' },
    });

    expect(response.headers.location).toBe(`https://api.example.com/api/v1/users/${response.json().id}`);
  });

  it('ignores X-Forwarded-* when TRUST_PROXY is off', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest(),
      headers: {
        host: 'direct.test',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-prefix': '/x',
      },
    });

    expect(response.headers.location).toBe(`http://direct.test/api/v1/users/${response.json().id}`);
  });
});
