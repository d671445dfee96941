// The event stream GET /api/v1/events (docs/webhooks.md), over a real socket: SSE
// messages of CloudEvents, the ownership rules of docs/api-guide.md#authentication-and-scopes, the `types` filter, Last-Event-ID
// resume, heartbeats, the end of every stream at shutdown, and no event skipped or repeated:
// under concurrent writers, and (PostgreSQL, where transactions interleave) when a longer
// transaction commits a smaller sequence after a later one.
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { recordEvent } from '../../src/events/index.js';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder } from '../support/factories.js';
import { openSse, type SseConnection, type SseMessage } from '../support/sse.js';
import { buildTestApp, engine } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';

const { app } = await buildTestApp(
  { BASE_URL: 'https://api.example.com' },
  { eventStream: { pollMs: 40, heartbeatMs: 150 } },
);
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/v1/events`;
const admin = asAdmin(app);

const open: SseConnection[] = [];
afterAll(() => {
  for (const c of open) c.close();
});

async function stream(headers: Record<string, string> = { authorization: ADMIN }, query = ''): Promise<SseConnection> {
  const connection = await openSse(`${base}${query}`, headers);
  open.push(connection);
  return connection;
}

const subjects = (messages: SseMessage[]) => messages.map((m) => (JSON.parse(m.data) as { subject: string }).subject);
const has = (subject: string, type?: string) => (messages: SseMessage[]) =>
  messages.some((m) => (type === undefined || m.event === type) && subjects([m])[0] === subject);

/** The events the database holds, in the stream's order, from sequence `after` on. */
async function storedOrder(after = 0): Promise<number[]> {
  const { rows } = await sql<{ sequence: number }>`
    select sequence from events where sequence > ${after} order by tx, sequence`.execute(app.db);
  return rows.map((r) => r.sequence);
}

describe('GET /api/v1/events', () => {
  it('streams the events committed after it opened, each as id (sequence), event (type) and a CloudEvent', async () => {
    const before = await createUser(app);
    const s = await stream();
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(s.headers['cache-control']).toBe('no-store');
    const user = await createUser(app);
    await admin({ method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'Renamed' } });
    const messages = await s.until(has(`users/${user.id}`, 'user.updated'));
    expect(subjects(messages)).not.toContain(`users/${before.id}`);
    const [created, updated] = messages.filter((m) => subjects([m])[0] === `users/${user.id}`);
    expect(created?.event).toBe('user.created');
    expect(updated?.event).toBe('user.updated');
    expect(Number(updated?.id)).toBeGreaterThan(Number(created?.id));
    const event = JSON.parse(updated!.data) as Record<string, unknown>;
    const current = await admin({ method: 'GET', url: `/api/v1/users/${user.id}` });
    expect(event).toEqual({
      specversion: '1.0',
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      source: 'https://api.example.com/api/v1',
      type: 'user.updated',
      subject: `users/${user.id}`,
      time: expect.stringMatching(/Z$/),
      datacontenttype: 'application/json',
      data: current.json(),
    });
    const { rows } = await sql<{
      sequence: number;
    }>`select sequence from events where id = ${event.id}`.execute(app.db);
    expect(String(rows[0]?.sequence)).toBe(updated?.id);
  });

  it('shows a caller without admin only its own orders and its own user, and only for the scopes it has', async () => {
    const product = await createProduct(app, {}, 100);
    const alice = await aCustomer(app, 'orders:read orders:write users:read users:write');
    const bob = await aCustomer(app, 'orders:read orders:write users:read users:write');
    const aliceStream = await stream({ authorization: alice.auth });
    const ordersOnly = await stream({ authorization: await bearer({ sub: String(alice.id), scope: 'orders:read' }) });
    const usersOnly = await stream({ authorization: await bearer({ sub: String(alice.id), scope: 'users:read' }) });
    const adminStream = await stream();

    const bobOrder = (await placeOrder(app, bob.auth, product.id, 1)).json<{ id: number }>();
    await app.inject({
      method: 'PATCH',
      url: `/api/v1/users/${bob.id}`,
      headers: { authorization: bob.auth },
      payload: { name: 'Bob' },
    });
    const aliceOrder = (await placeOrder(app, alice.auth, product.id, 1)).json<{ id: number }>();
    await admin({ method: 'DELETE', url: `/api/v1/orders/${aliceOrder.id}` });
    await app.inject({
      method: 'PATCH',
      url: `/api/v1/users/${alice.id}`,
      headers: { authorization: alice.auth },
      payload: { name: 'Alice' },
    });

    // The administrator sees all five; then every other stream has had its chance.
    await adminStream.until(has(`users/${alice.id}`, 'user.updated'));
    await aliceStream.until(has(`users/${alice.id}`, 'user.updated'));
    await usersOnly.until(has(`users/${alice.id}`, 'user.updated'));
    await ordersOnly.until(has(`orders/${aliceOrder.id}`, 'order.deleted'));
    const mine = [`orders/${aliceOrder.id}`, `users/${alice.id}`];
    expect(subjects(aliceStream.messages)).toEqual([mine[0], mine[0], mine[1]]);
    expect(aliceStream.messages.map((m) => m.event)).toEqual(['order.created', 'order.deleted', 'user.updated']);
    expect(subjects(ordersOnly.messages)).toEqual([mine[0], mine[0]]);
    expect(subjects(usersOnly.messages)).toEqual([mine[1]]);
    expect(subjects(adminStream.messages)).toEqual(
      expect.arrayContaining([`orders/${bobOrder.id}`, `users/${bob.id}`, ...mine]),
    );
  });

  it('sends only the types asked for (`types`: exact types and `order.*` / `user.*` / `*`)', async () => {
    const product = await createProduct(app, {}, 10);
    const customer = await aCustomer(app);
    const shippedAndUsers = await stream({ authorization: ADMIN }, '?types=order.confirmed,user.*');
    const everything = await stream({ authorization: ADMIN }, '?types=*');
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json<{ id: number }>();
    await admin({ method: 'POST', url: `/api/v1/orders/${order.id}/confirmation` });
    const user = await createUser(app);
    await everything.until(has(`users/${user.id}`));
    await shippedAndUsers.until(has(`users/${user.id}`));
    expect(everything.messages.map((m) => m.event)).toEqual(['order.created', 'order.confirmed', 'user.created']);
    expect(shippedAndUsers.messages.map((m) => m.event)).toEqual(['order.confirmed', 'user.created']);
  });

  it('resumes after Last-Event-ID with every later event, in order, and none before it', async () => {
    const first = await stream();
    const users = [await createUser(app), await createUser(app), await createUser(app)];
    await first.until(has(`users/${users[2]!.id}`));
    first.close();
    const more = [await createUser(app), await createUser(app)];
    const lastSeen = first.messages.find((m) => subjects([m])[0] === `users/${users[0]!.id}`)!;

    const resumed = await stream({ authorization: ADMIN, 'last-event-id': lastSeen.id! });
    await resumed.until(has(`users/${more[1]!.id}`));
    expect(subjects(resumed.messages)).toEqual([...users.slice(1), ...more].map((u) => `users/${u.id}`));
    expect(resumed.messages.map((m) => Number(m.id))).toEqual((await storedOrder(Number(lastSeen.id))).slice(0, 4));
  });

  it('resumes a caller without admin with only its own events, past more than a page of others', async () => {
    const me = await createUser(app);
    const start = await stream({ authorization: ADMIN });
    await createUser(app); // an event to resume after
    const [marker] = await start.until((ms) => ms.length > 0);
    start.close();
    const mine = await bearer({ sub: String(me.id), scope: 'users:read users:write' });
    // More than one page (500) of other users' events, then two of mine.
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from events`.execute(app.db);
    const others = Math.max(0, 520 - (rows[0]?.n ?? 0));
    for (let i = 0; i < others; i += 20) await Promise.all(Array.from({ length: 20 }, () => createUser(app)));
    for (const name of ['Mine One', 'Mine Two'])
      expect(
        (
          await app.inject({
            method: 'PATCH',
            url: `/api/v1/users/${me.id}`,
            headers: { authorization: mine },
            payload: { name },
          })
        ).statusCode,
      ).toBe(200);
    const resumed = await stream({ authorization: mine, 'last-event-id': marker!.id! });
    const got = await resumed.until((ms) => ms.length >= 2);
    expect(got.map((m) => [m.event, subjects([m])[0]])).toEqual([
      ['user.updated', `users/${me.id}`],
      ['user.updated', `users/${me.id}`],
    ]);
  });

  it('sends a comment line every heartbeat period, so that proxies keep the stream open', async () => {
    const s = await stream();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(s.comments).toBeGreaterThanOrEqual(2);
  });

  it('misses and repeats nothing while many requests write at once', async () => {
    const startedAt = (await storedOrder()).at(-1) ?? 0;
    const streams = await Promise.all([stream(), stream(), stream({ authorization: ADMIN }, '?types=user.*')]);
    const product = await createProduct(app, {}, 1000);
    const customers = await Promise.all(Array.from({ length: 4 }, () => aCustomer(app)));
    await Promise.all(
      customers.flatMap((c) => Array.from({ length: 10 }, () => placeOrder(app, c.auth, product.id, 1))),
    );
    const last = await createUser(app);
    for (const s of streams) await s.until(has(`users/${last.id}`));
    const expected = await storedOrder(startedAt);
    const ids = (s: SseConnection) => s.messages.map((m) => Number(m.id));
    // Each stream opened before any of these writes, so each saw every one, once, in (tx, sequence) order.
    expect(ids(streams[0])).toEqual(expected);
    expect(ids(streams[1])).toEqual(expected);
    expect(streams[2].messages.every((m) => m.event.startsWith('user.'))).toBe(true);
    expect(streams[2].messages).toHaveLength(5);
  });

  it('leaves the hub when the client goes away', async () => {
    const s = await stream();
    expect(app.eventHub.openStreams).toBeGreaterThan(0);
    for (const c of open) c.close();
    await expect.poll(() => app.eventHub.openStreams, { timeout: 5000 }).toBe(0);
    // The hub forgot it: a later event reaches no closed stream, and a new stream still gets it.
    const received = s.messages.length;
    const after = await stream();
    const user = await createUser(app);
    await after.until(has(`users/${user.id}`));
    expect(s.messages).toHaveLength(received);
    expect(app.eventHub.openStreams).toBe(1);
  });

  it.runIf(engine === 'postgres')(
    'sends an event that a longer transaction commits later with a smaller sequence (none skipped)',
    async () => {
      const user = await createUser(app);
      const s = await stream();
      let commit!: () => void;
      const held = new Promise<void>((resolve) => (commit = resolve));
      let inserted!: () => void;
      const insertedYet = new Promise<void>((resolve) => (inserted = resolve));
      // The longer transaction takes its sequence first and commits last.
      const longer = app.db.transaction().execute(async (trx) => {
        await recordEvent(trx, {
          type: 'user.password_changed',
          subject: `users/${user.id}`,
          data: `{"id":${user.id}}`,
          owner: user.id,
        });
        inserted();
        await held;
      });
      await insertedYet;
      const later = await createUser(app); // a larger sequence, committed first
      // Below the horizon only: while the longer transaction is open, the later event waits.
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(subjects(s.messages)).not.toContain(`users/${later.id}`);
      commit();
      await longer;
      const messages = await s.until(has(`users/${later.id}`));
      const early = messages.find(
        (m) => m.event === 'user.password_changed' && subjects([m])[0] === `users/${user.id}`,
      );
      const late = messages.find((m) => subjects([m])[0] === `users/${later.id}`);
      expect(early).toBeDefined();
      expect(Number(early!.id)).toBeLessThan(Number(late!.id));
      expect(messages.indexOf(early!)).toBeLessThan(messages.indexOf(late!));

      // A client that resumes after the smaller one gets the larger one, and not the smaller again.
      const resumed = await stream({ authorization: ADMIN, 'last-event-id': early!.id! });
      await resumed.until(has(`users/${later.id}`));
      expect(resumed.messages.map((m) => m.id)).not.toContain(early!.id);
    },
  );
});

describe('GET /api/v1/events refusals', () => {
  it('401 without a token, 403 without orders:read or users:read', async () => {
    const none = await stream({});
    expect(none.status).toBe(401);
    const products = await stream({ authorization: await bearer({ sub: '1', scope: 'products:read' }) });
    expect(products.status).toBe(403);
    expect(products.headers['www-authenticate']).toBe(
      'Bearer error="insufficient_scope", scope="orders:read users:read"',
    );
  });

  it('406 for an Accept that does not take text/event-stream', async () => {
    const json = await stream({ authorization: ADMIN, accept: 'application/json' });
    expect(json.status).toBe(406);
    expect(JSON.parse(json.body())).toMatchObject({ status: 406 });
  });

  it('400 naming the member for an unknown type and a Last-Event-ID that is not an event id', async () => {
    const badType = await stream({ authorization: ADMIN }, '?types=order.exploded');
    expect(badType.status).toBe(400);
    await badType.ended;
    expect(JSON.stringify(JSON.parse(badType.body()))).toContain('types');
    const badId = await stream({ authorization: ADMIN, 'last-event-id': 'abc' });
    expect(badId.status).toBe(400);
    await badId.ended;
    expect(badId.body().toLowerCase()).toContain('last-event-id');
  });
});

describe('shutdown', () => {
  it("sends a write's events as soon as the write has answered, not at the next poll", async () => {
    // Polling once an hour: only the write's own hook (onWriteResponse) can bring the events.
    const { app: slow } = await buildTestApp({}, { eventStream: { pollMs: 3_600_000, heartbeatMs: 3_600_000 } });
    await slow.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(slow.server.address() as AddressInfo).port}/api/v1/events`;
    const s = await openSse(url, { authorization: ADMIN });

    const user = await createUser(slow);
    const messages = await s.until(has(`users/${user.id}`, 'user.created'));

    expect(subjects(messages)).toEqual([`users/${user.id}`]);
    s.close();
    await slow.close();
  });

  it('ends every stream when the instance closes', async () => {
    const { app: closing } = await buildTestApp({}, { eventStream: { pollMs: 40, heartbeatMs: 60_000 } });
    await closing.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(closing.server.address() as AddressInfo).port}/api/v1/events`;
    const streams = await Promise.all([openSse(url, { authorization: ADMIN }), openSse(url, { authorization: ADMIN })]);
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
    const started = Date.now();
    await closing.close();
    await Promise.all(streams.map((s) => s.ended));
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('stream limits', async () => {
  const { app: limited } = await buildTestApp(
    { EVENT_STREAMS_PER_CALLER: '2', METRICS_PORT: undefined },
    { eventStream: { pollMs: 40, heartbeatMs: 60_000 } },
  );
  await limited.listen({ port: 0, host: '127.0.0.1' });
  afterAll(() => limited.close());
  const url = `http://127.0.0.1:${(limited.server.address() as AddressInfo).port}/api/v1/events`;
  const openGauge = async () => {
    const text = await limited.metrics.metrics();
    return Number(/^event_streams_open (\d+)/m.exec(text)?.[1]);
  };

  it('opens at most EVENT_STREAMS_PER_CALLER per caller (429 with Retry-After), and counts a closed one out', async () => {
    const caller = await bearer({ sub: '881', scope: 'orders:read' });
    const other = await bearer({ sub: '882', scope: 'orders:read' });
    const first = await openSse(url, { authorization: caller });
    const second = await openSse(url, { authorization: caller });
    const third = await openSse(url, { authorization: caller });
    expect([first.status, second.status, third.status]).toEqual([200, 200, 429]);
    expect(third.headers['retry-after']).toBe('5');
    expect(third.body()).toContain('At most 2 event streams may be open per caller');
    const others = await openSse(url, { authorization: other });
    expect(others.status).toBe(200);
    expect(await openGauge()).toBe(3);

    first.close();
    await new Promise((r) => setTimeout(r, 200));
    const again = await openSse(url, { authorization: caller });
    expect(again.status).toBe(200);
    for (const s of [second, others, again]) s.close();
    await new Promise((r) => setTimeout(r, 200));
    expect(await openGauge()).toBe(0);
  });

  it('ends a stream when its token expires', async () => {
    const shortLived = await bearer({ sub: '883', scope: 'orders:read', expiresIn: 2 });
    const stream = await openSse(url, { authorization: shortLived });
    expect(stream.status).toBe(200);
    const started = Date.now();
    await stream.ended;
    // exp is in whole seconds: it ends within the token's last second, never after.
    expect(Date.now() - started).toBeLessThan(3500);
    expect(await openGauge()).toBe(0);
  });

  it('releases a stream cut while it opens', async () => {
    const caller = await bearer({ sub: '884', scope: 'orders:read' });
    // Cut right after the request is sent, many times: none may stay counted.
    for (let i = 0; i < 20; i++) {
      const { request } = await import('node:http');
      await new Promise<void>((resolve) => {
        const req = request(url, { headers: { accept: 'text/event-stream', authorization: caller } });
        req.on('error', () => resolve());
        req.end(() => {
          req.destroy();
          resolve();
        });
      });
    }
    // The server notices each cut when it does; none may stay counted.
    for (let i = 0; i < 50 && (await openGauge()) !== 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await openGauge()).toBe(0);
    const afterwards = [await openSse(url, { authorization: caller }), await openSse(url, { authorization: caller })];
    expect(afterwards.map((s) => s.status)).toEqual([200, 200]);
    for (const s of afterwards) s.close();
  });
});
