// The transactional outbox (docs/webhooks.md): every change of a user or an order
// writes exactly one event in the change's own transaction; a request that changes nothing
// writes none. The event's data is the v1 representation after the change (what GET answers
// then), or {"id": …} for deletions and password changes; never a password or its hash.
import { sql } from 'kysely';
import { beforeEach, describe, expect, it } from 'vitest';
import { EVENT_TYPES, toCloudEvent, type EventType } from '../../src/events/index.js';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder } from '../support/factories.js';
import { purgeExpiredEvents } from '../../src/events/retention.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

interface Stored {
  sequence: number;
  id: string;
  type: EventType;
  subject: string;
  time: Date;
  data: string;
}

let seen = 0;
/** The events written since the last call, oldest first. */
async function newEvents(): Promise<Stored[]> {
  const { rows } = await sql<Stored>`
    select sequence, id::text as id, type, subject, time, data from events where sequence > ${seen} order by sequence`.execute(
    app.db,
  );
  for (const row of rows) seen = Math.max(seen, row.sequence);
  return rows;
}

beforeEach(async () => {
  await newEvents();
});

async function v1(path: string): Promise<unknown> {
  const response = await api({ method: 'GET', url: `/api/v1/${path}` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json();
}

async function expectOneEvent(type: string, subject: string, data: unknown): Promise<Stored> {
  const events = await newEvents();
  expect(events.map((e) => [e.type, e.subject])).toEqual([[type, subject]]);
  const event = events[0]!;
  expect(JSON.parse(event.data)).toEqual(data);
  expect(event.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(event.data).not.toMatch(/password|hash|argon/i);
  return event;
}

describe('user events', () => {
  it('user.created, user.updated (PUT and PATCH, v1 and v2), user.password_changed, user.deleted', async () => {
    const user = await createUser(app, { password: 'a secret password' });
    await expectOneEvent('user.created', `users/${user.id}`, await v1(`users/${user.id}`));

    const put = await api({
      method: 'PUT',
      url: `/api/v1/users/${user.id}`,
      payload: { name: 'Put Name', email: user.email },
    });
    expect(put.statusCode).toBe(200);
    await expectOneEvent('user.updated', `users/${user.id}`, await v1(`users/${user.id}`));

    const patch = await api({
      method: 'PATCH',
      url: `/api/v2/users/${user.id}`,
      payload: { age: 40 },
    });
    expect(patch.statusCode, patch.body).toBe(200);
    // The data is v1's shape even when v2 made the change.
    await expectOneEvent('user.updated', `users/${user.id}`, await v1(`users/${user.id}`));

    const change = await api({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-changes`,
      payload: { currentPassword: 'a secret password', newPassword: 'another secret password' },
    });
    expect(change.statusCode).toBe(204);
    await expectOneEvent('user.password_changed', `users/${user.id}`, { id: user.id });

    expect((await api({ method: 'DELETE', url: `/api/v1/users/${user.id}` })).statusCode).toBe(204);
    await expectOneEvent('user.deleted', `users/${user.id}`, { id: user.id });
  });

  it('none for a request that changes nothing or fails', async () => {
    const user = await createUser(app);
    const other = await createUser(app);
    await newEvents();
    const attempts = [
      // a duplicate e-mail (409), a stale If-Match (412), a missing user (404), a wrong current
      // password (422), a PATCH without members (nothing to change), DELETE of one already gone
      {
        method: 'POST',
        url: '/api/v1/users',
        payload: { name: 'Dup', email: other.email, password: 'long enough pw' },
      },
      { method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'X Y' }, headers: { 'if-match': '"99"' } },
      { method: 'PATCH', url: '/api/v1/users/987654321', payload: { name: 'X Y' } },
      {
        method: 'POST',
        url: `/api/v1/users/${user.id}/password-changes`,
        payload: { currentPassword: 'wrong password', newPassword: 'another secret password' },
      },
      { method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: {} },
      { method: 'DELETE', url: '/api/v1/users/987654321' },
    ] as const;
    for (const attempt of attempts) {
      const response = await api(attempt);
      expect([200, 204, 404, 409, 412, 422], `${attempt.method} ${attempt.url}`).toContain(response.statusCode);
    }
    expect(await newEvents()).toEqual([]);
  });
});

describe('order events', () => {
  it('order.created, .updated, .confirmed, .shipped, .delivered, .cancelled, .deleted', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 7.5 }, 100);
    await newEvents(); // the customer's user.created
    const order = (await placeOrder(app, customer.auth, product.id, 2)).json<{ id: number }>();
    await expectOneEvent('order.created', `orders/${order.id}`, await v1(`orders/${order.id}`));

    const patched = await api({
      method: 'PATCH',
      url: `/api/v1/orders/${order.id}`,
      payload: { note: 'Leave at the door' },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    await expectOneEvent('order.updated', `orders/${order.id}`, await v1(`orders/${order.id}`));

    for (const [noun, type] of [
      ['confirmation', 'order.confirmed'],
      ['shipment', 'order.shipped'],
      ['delivery', 'order.delivered'],
    ] as const) {
      expect((await api({ method: 'POST', url: `/api/v1/orders/${order.id}/${noun}` })).statusCode).toBe(200);
      await expectOneEvent(type, `orders/${order.id}`, await v1(`orders/${order.id}`));
    }

    const second = (await placeOrder(app, customer.auth, product.id, 1)).json<{ id: number }>();
    await newEvents();
    const cancelled = await api({
      method: 'POST',
      url: `/api/v1/orders/${second.id}/cancellation`,
      payload: { reason: 'Changed my mind' },
    });
    expect(cancelled.statusCode).toBe(200);
    await expectOneEvent('order.cancelled', `orders/${second.id}`, await v1(`orders/${second.id}`));

    expect((await api({ method: 'DELETE', url: `/api/v1/orders/${second.id}` })).statusCode).toBe(204);
    await expectOneEvent('order.deleted', `orders/${second.id}`, { id: second.id });
  });

  it('none for a failure, an Idempotency-Key replay, a PATCH without changes, or DELETE of a missing order', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 2 }, 3);
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json<{ id: number }>();
    await newEvents();

    // Not enough stock (422: the statement that places an order writes nothing, event and all).
    expect((await placeOrder(app, customer.auth, product.id, 50)).statusCode).toBe(422);
    // An invalid transition (409), a stale If-Match (412), nothing to change, a missing order.
    expect((await api({ method: 'POST', url: `/api/v1/orders/${order.id}/shipment` })).statusCode).toBe(409);
    const stale = await api({
      method: 'PATCH',
      url: `/api/v1/orders/${order.id}`,
      payload: { note: 'x' },
      headers: { 'if-match': '"42"' },
    });
    expect(stale.statusCode).toBe(412);
    const empty = await api({ method: 'PATCH', url: `/api/v1/orders/${order.id}`, payload: {} });
    expect(empty.statusCode).toBe(200);
    expect(empty.headers.etag).toBe('"1"'); // no new version either
    expect((await api({ method: 'DELETE', url: '/api/v1/orders/987654321' })).statusCode).toBe(204);
    expect(await newEvents()).toEqual([]);

    // A keyed create writes its event once; the replay writes none.
    const keyed = () =>
      app.inject({
        method: 'POST',
        url: '/api/v1/orders',
        headers: { authorization: customer.auth, 'idempotency-key': `outbox-${order.id}` },
        payload: { productId: product.id, quantity: 1 },
      });
    const first = await keyed();
    expect(first.statusCode).toBe(201);
    const replay = await keyed();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const events = await newEvents();
    expect(events.map((e) => e.type)).toEqual(['order.created']);
  });
});

describe('order.created, written in the statement that places the order', () => {
  it('carries byte for byte the body GET answers: totals without trailing zeros, instants to the millisecond', async () => {
    const customer = await aCustomer(app);
    for (const [price, quantity] of [
      [7.5, 2],
      [0.1, 3],
      [19.99, 7],
      [1234567.89, 1000],
      [0, 1],
      [12, 10],
    ] as const) {
      const product = await createProduct(app, { price }, 1000);
      await newEvents();
      const order = (await placeOrder(app, customer.auth, product.id, quantity)).json<{ id: number }>();
      const [event] = await newEvents();
      const get = await api({ method: 'GET', url: `/api/v1/orders/${order.id}` });
      expect(event?.data).toBe(get.body);
    }
  });
});

describe('the CloudEvents envelope', () => {
  it('is CloudEvents 1.0 JSON with source <BASE_URL>/api/v1 and the stored data', async () => {
    const user = await createUser(app);
    const [event] = await newEvents();
    const envelope = JSON.parse(toCloudEvent(event!, 'https://api.example.com/api/v1')) as Record<string, unknown>;
    expect(envelope).toEqual({
      specversion: '1.0',
      id: event!.id,
      source: 'https://api.example.com/api/v1',
      type: 'user.created',
      subject: `users/${user.id}`,
      time: event!.time.toISOString(),
      datacontenttype: 'application/json',
      data: { id: user.id, name: user.name, email: user.email, createdAt: user.createdAt },
    });
    expect(EVENT_TYPES).toHaveLength(11);
  });
});

describe('retention', () => {
  it('purges events older than EVENT_RETENTION_DAYS (7) and keeps the rest', async () => {
    await createUser(app);
    await sql`insert into events (id, type, subject, time, data)
      select gen_random_uuid(), 'user.deleted', 'users/' || g, now() - interval '8 days', '{"id":' || g || '}'
        from generate_series(1, 25) g`.execute(app.db);
    const count = async () =>
      (await sql<{ n: number }>`select count(*)::int as n from events`.execute(app.db)).rows[0]!.n;
    const before = await count();
    expect(await purgeExpiredEvents(app)).toBe(25);
    expect(await count()).toBe(before - 25);
    // A later clock: now every event is past the retention.
    expect(await purgeExpiredEvents(app, new Date(Date.now() + 8 * 86_400_000))).toBe(before - 25);
    expect(await count()).toBe(0);
  });

  it('deletes the webhook deliveries of the events it purges', async () => {
    await createUser(app);
    await sql`
      with s as (
        insert into webhook_subscriptions (url, events, secret)
        values ('https://hooks.example.com/in', array['*'], 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
        returning id
      ), e as (
        insert into events (id, type, subject, time, data)
        select gen_random_uuid(), 'user.deleted', 'users/' || g, now() - interval '8 days', '{"id":' || g || '}'
          from generate_series(1, 5) g
        returning sequence, subject
      )
      insert into webhook_deliveries (subscription_id, event_sequence, subject)
      select s.id, e.sequence, e.subject from s, e`.execute(app.db);
    const deliveries = async () =>
      (await sql<{ n: number }>`select count(*)::int as n from webhook_deliveries`.execute(app.db)).rows[0]!.n;
    const before = await deliveries();
    expect(before).toBeGreaterThanOrEqual(5);
    await purgeExpiredEvents(app);
    expect(await deliveries()).toBe(before - 5);
    const orphans = await sql<{ n: number }>`
      select count(*)::int as n from webhook_deliveries d
       where not exists (select 1 from events e where e.sequence = d.event_sequence)`.execute(app.db);
    expect(orphans.rows[0]!.n).toBe(0);
  });
});
