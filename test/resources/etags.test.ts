// docs/api-guide.md#safe-retries: users and orders carry a version; ETag on reads and writes, If-None-Match → 304,
// If-Match → 412 on a stale version, check and write atomic. v1 and v2 alike.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

const etagOf = (r: { headers: Record<string, unknown> }) => r.headers.etag as string;

describe.each([1, 2])('users, v%i', (version) => {
  const url = (id: number) => `/api/v${version}/users/${id}`;
  const change = version === 1 ? { name: 'Grace Hopper' } : { name: 'Grace Hopper', age: 40 };

  it('gives every representation its version as ETag, and every change a new one', async () => {
    const created = await api({
      method: 'POST',
      url: `/api/v${version}/users`,
      payload:
        version === 1
          ? { name: 'Ada', email: `ada.${Date.now()}.${version}@example.com`, password: 'correct horse battery' }
          : {
              name: 'Ada',
              email: `ada.${Date.now()}.${version}@example.com`,
              password: 'correct horse battery',
              age: 36,
              address: { street: 'Main Street 1', postalCode: '10115' },
            },
    });
    const { id } = created.json();
    const read = await api({ method: 'GET', url: url(id) });
    const patched = await api({ method: 'PATCH', url: url(id), payload: change });
    const reread = await api({ method: 'GET', url: url(id) });

    expect(created.statusCode).toBe(201);
    expect(etagOf(created)).toBe('"1"');
    expect(etagOf(read)).toBe('"1"');
    expect(etagOf(patched)).toBe('"2"');
    expect(etagOf(reread)).toBe('"2"');
    // The version is a header only: no version's body grows a member.
    expect(Object.keys(read.json())).not.toContain('version');
  });

  it('answers If-None-Match naming the current version with 304 and no body', async () => {
    const user = await createUser(app);
    const fresh = await api({ method: 'GET', url: url(user.id), headers: { 'if-none-match': 'W/"7", "1"' } });
    const star = await api({ method: 'GET', url: url(user.id), headers: { 'if-none-match': '*' } });
    const stale = await api({ method: 'GET', url: url(user.id), headers: { 'if-none-match': '"0"' } });

    expect(fresh.statusCode).toBe(304);
    expect(fresh.body).toBe('');
    expect(etagOf(fresh)).toBe('"1"');
    expect(star.statusCode).toBe(304);
    expect(stale.statusCode).toBe(200);
  });

  it('refuses PUT and PATCH with a stale If-Match: 412, the current ETag, nothing changed', async () => {
    const user = await createUser(app);
    await api({ method: 'PATCH', url: url(user.id), payload: { name: 'Second Name' } });

    const patch = await api({ method: 'PATCH', url: url(user.id), headers: { 'if-match': '"1"' }, payload: change });
    const put = await api({
      method: 'PUT',
      url: url(user.id),
      headers: { 'if-match': '"1"' },
      payload:
        version === 1
          ? { name: 'Third', email: user.email }
          : { name: 'Third', email: user.email, age: 30, address: { street: 'Main Street 1', postalCode: '10115' } },
    });
    const empty = await api({ method: 'PATCH', url: url(user.id), headers: { 'if-match': '"1"' }, payload: {} });
    const after = await api({ method: 'GET', url: url(user.id) });

    for (const refused of [patch, put, empty]) {
      expect(refused.statusCode).toBe(412);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(refused.json()).toMatchObject({
        type: 'about:blank',
        title: 'Precondition Failed',
        status: 412,
        detail: `User ${user.id} is at version 2, which If-Match does not name.`,
      });
      expect(etagOf(refused)).toBe('"2"');
    }
    expect(after.json().name).toBe('Second Name');
    expect(etagOf(after)).toBe('"2"');
  });

  it('writes with the current If-Match, with *, and with a list naming it', async () => {
    const user = await createUser(app);
    const one = await api({ method: 'PATCH', url: url(user.id), headers: { 'if-match': '"1"' }, payload: change });
    const star = await api({ method: 'PATCH', url: url(user.id), headers: { 'if-match': '*' }, payload: change });
    const list = await api({
      method: 'PATCH',
      url: url(user.id),
      headers: { 'if-match': '"9", "3"' },
      payload: change,
    });
    const weak = await api({ method: 'PATCH', url: url(user.id), headers: { 'if-match': 'W/"4"' }, payload: change });

    expect([one.statusCode, star.statusCode, list.statusCode, weak.statusCode]).toEqual([200, 200, 200, 412]);
    expect([etagOf(one), etagOf(star), etagOf(list)]).toEqual(['"2"', '"3"', '"4"']);
  });

  it('keeps 404 for a missing user, with or without If-Match', async () => {
    const star = await api({ method: 'PATCH', url: url(999_999_999), headers: { 'if-match': '*' }, payload: change });
    const exact = await api({
      method: 'PATCH',
      url: url(999_999_999),
      headers: { 'if-match': '"1"' },
      payload: change,
    });
    expect([star.statusCode, exact.statusCode]).toEqual([404, 404]);
  });

  it('deletes only at the version If-Match names; a user already gone is still 204', async () => {
    const user = await createUser(app);
    await api({ method: 'PATCH', url: url(user.id), payload: { name: 'Changed Once' } });

    const stale = await api({ method: 'DELETE', url: url(user.id), headers: { 'if-match': '"1"' } });
    const stillThere = await api({ method: 'GET', url: url(user.id) });
    const current = await api({ method: 'DELETE', url: url(user.id), headers: { 'if-match': '"2"' } });
    const again = await api({ method: 'DELETE', url: url(user.id), headers: { 'if-match': '"2"' } });

    expect(stale.statusCode).toBe(412);
    expect(stillThere.statusCode).toBe(200);
    expect(current.statusCode).toBe(204);
    expect(again.statusCode).toBe(204);
    expect((await api({ method: 'GET', url: url(user.id) })).statusCode).toBe(404);
  });

  it('lets one of two writers with the same If-Match through; the other gets 412', async () => {
    const user = await createUser(app);
    const write = (name: string) =>
      api({ method: 'PATCH', url: url(user.id), headers: { 'if-match': '"1"' }, payload: { name } });
    const answers = await Promise.all([write('Writer One'), write('Writer Two')]);

    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 412]);
    const winner = answers.find((a) => a.statusCode === 200);
    expect((await api({ method: 'GET', url: url(user.id) })).json().name).toBe(winner?.json().name);
  });
});

describe.each([1, 2])('orders, v%i', (version) => {
  const url = (id: number, sub = '') => `/api/v${version}/orders/${id}${sub}`;

  async function anOrder() {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 5 }, 10);
    const placed = await placeOrder(app, customer.auth, product.id, 2);
    return { placed, order: placed.json(), product };
  }

  it('versions an order through changes, actions and cancellation', async () => {
    const { placed, order } = await anOrder();
    const read = await api({ method: 'GET', url: url(order.id) });
    const patched = await api({ method: 'PATCH', url: url(order.id), payload: { note: 'Leave at the door' } });
    const confirmed = await api({ method: 'POST', url: url(order.id, '/confirmation') });
    const cancelled = await api({
      method: 'POST',
      url: url(order.id, '/cancellation'),
      payload: { reason: 'Changed my mind' },
    });

    expect(etagOf(placed)).toBe('"1"');
    expect(etagOf(read)).toBe('"1"');
    expect(etagOf(patched)).toBe('"2"');
    expect(etagOf(confirmed)).toBe('"3"');
    expect(etagOf(cancelled)).toBe('"4"');
    expect(Object.keys(read.json())).not.toContain('version');

    const notModified = await api({ method: 'GET', url: url(order.id), headers: { 'if-none-match': '"4"' } });
    expect(notModified.statusCode).toBe(304);
    expect(notModified.body).toBe('');
  });

  it('refuses a stale If-Match on PATCH, actions and DELETE before any other rule, and moves no stock', async () => {
    const { order, product } = await anOrder();
    await api({ method: 'PATCH', url: url(order.id), payload: { note: 'v2' } });
    const stale = { 'if-match': '"1"' };

    const patch = await api({ method: 'PATCH', url: url(order.id), headers: stale, payload: { note: 'late' } });
    const confirm = await api({ method: 'POST', url: url(order.id, '/confirmation'), headers: stale });
    const ship = await api({ method: 'POST', url: url(order.id, '/shipment'), headers: stale });
    const cancel = await api({
      method: 'POST',
      url: url(order.id, '/cancellation'),
      headers: stale,
      payload: { reason: 'late' },
    });
    const remove = await api({ method: 'DELETE', url: url(order.id), headers: stale });

    for (const refused of [patch, confirm, ship, cancel, remove]) {
      expect(refused.statusCode, refused.body).toBe(412);
      expect(refused.json()).toMatchObject({ title: 'Precondition Failed', status: 412 });
      expect(etagOf(refused)).toBe('"2"');
    }
    const after = await api({ method: 'GET', url: url(order.id) });
    expect(after.json()).toMatchObject({ status: 'PENDING', note: 'v2' });
    expect(await stockOf(app, product.id)).toEqual({ available: 8, reserved: 2 });
  });

  it('acts with the current If-Match or *, and keeps 404 for an order that is not there', async () => {
    const { order } = await anOrder();
    const confirmed = await api({
      method: 'POST',
      url: url(order.id, '/confirmation'),
      headers: { 'if-match': '"1"' },
    });
    const shipped = await api({ method: 'POST', url: url(order.id, '/shipment'), headers: { 'if-match': '*' } });
    const missing = await api({ method: 'POST', url: url(999_999_999, '/shipment'), headers: { 'if-match': '*' } });

    expect([confirmed.statusCode, shipped.statusCode, missing.statusCode]).toEqual([200, 200, 404]);
    expect(etagOf(shipped)).toBe('"3"');
  });

  it('lets one of two cancellations with the same If-Match through, and releases the stock once', async () => {
    const { order, product } = await anOrder();
    const cancel = () =>
      api({
        method: 'POST',
        url: url(order.id, '/cancellation'),
        headers: { 'if-match': '"1"' },
        payload: { reason: 'twice' },
      });
    const answers = await Promise.all([cancel(), cancel()]);

    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 412]);
    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
  });
});
