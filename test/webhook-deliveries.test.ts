// Webhook delivery (DESIGN §12, issue #15 part 3), against receivers on 127.0.0.1 only: signed
// in the Standard Webhooks format (verified by the `standardwebhooks` library), retried with
// the same webhook-id, dead after the schedule, 410 disables, redirects not followed, per
// subject in event order without one subject blocking another, and the address actually
// connected to checked at every attempt (a host that now resolves to 127.0.0.1 is refused).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../src/events/index.js';
import { asAdmin, createUser } from './support/factories.js';
import { resolvedDocument } from './support/openapi.js';
import { buildTestApp } from './support/test-app.js';

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsPlugin as unknown as (ajv: Ajv2020) => Ajv2020;

interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}

/** A receiver on 127.0.0.1: records every request; `answer` picks the status per request. */
function receiver(answer: (path: string, body: string, count: number) => number | 'hang') {
  const received: Received[] = [];
  const counts = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body, at: Date.now() });
      const n = (counts.get(path) ?? 0) + 1;
      counts.set(path, n);
      const status = answer(path, body, n);
      if (status === 'hang') return;
      if (status === 302) res.writeHead(302, { location: '/ok' });
      else res.writeHead(status);
      res.end();
    });
  });
  return { server, received };
}

const rx = receiver((path, body, n) => {
  if (path.startsWith('/ok')) return 204;
  if (path === '/flaky') return n <= 2 ? 500 : 200;
  if (path === '/down') return 503;
  if (path === '/gone') return 410;
  if (path === '/redirect') return 302;
  if (path.startsWith('/slow')) return 'hang';
  if (path === '/ordered') return body.includes('"name":"Blocked') && n <= 2 ? 500 : 204;
  return 404;
});
let base = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => rx.server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(rx.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  rx.server.closeAllConnections();
  await new Promise((resolve) => rx.server.close(resolve));
});

const resolveHost = (host: string) =>
  host === 'localhost' ? Promise.resolve(['127.0.0.1']) : Promise.reject(new Error(`ENOTFOUND ${host}`));

const { app } = await buildTestApp(
  {
    WEBHOOK_DISPATCHER: 'true',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_RETRY_SCHEDULE: '150ms,150ms',
    WEBHOOK_POLL_MS: '50',
    WEBHOOK_TIMEOUT_MS: '500',
    BASE_URL: 'https://api.example.com',
  },
  { resolveHost },
);
const api = asAdmin(app);

async function subscribe(path: string, events: string[] = ['user.*']) {
  const response = await api({
    method: 'POST',
    url: '/api/v1/webhook-subscriptions',
    payload: { url: `${base}${path}`, events },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ id: number; secret: string }>();
}

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function deliveriesOf(subscriptionId: number) {
  const { rows } = await sql<{
    status: string;
    attempts: number;
    last_response_status: number | null;
    last_error: string | null;
  }>`select status, attempts, last_response_status, last_error from webhook_deliveries
      where subscription_id = ${subscriptionId} order by id`.execute(app.db);
  return rows;
}

const at = (path: string) => rx.received.filter((r) => r.path === path);

describe('recording delivered attempts', () => {
  it('finds the deliveries by primary key, never by reading the whole table (migration 0018)', async () => {
    // The function's plan is made once per session; planned on a small table it was a sequential
    // scan that the session kept as the table grew. pg_stat_xact_user_tables counts this
    // transaction's scans only.
    const seqScans = await app.db.transaction().execute(async (trx) => {
      await sql`select webhook_record_delivered(array[-1]::bigint[], array[204]::integer[])`.execute(trx);
      const { rows } = await sql<{ seq_scan: string | number }>`select seq_scan from pg_stat_xact_user_tables
          where relname = 'webhook_deliveries'`.execute(trx);
      return Number(rows[0]?.seq_scan);
    });
    expect(seqScans).toBe(0);
  });
});

describe('a delivery', () => {
  it('is a CloudEvent, signed so that a Standard Webhooks library verifies it', async () => {
    const sub = await subscribe('/ok/signed');
    const user = await createUser(app);
    const [request] = await until('the delivery', () => (at('/ok/signed').length > 0 ? at('/ok/signed') : undefined));
    const headers = request!.headers as Record<string, string>;
    expect(headers['content-type']).toBe('application/cloudevents+json');
    const verified = new Webhook(sub.secret).verify(request!.body, headers) as Record<string, unknown>;
    expect(verified).toMatchObject({
      specversion: '1.0',
      type: 'user.created',
      source: 'https://api.example.com/api/v1',
      subject: `users/${user.id}`,
      datacontenttype: 'application/json',
      data: { id: user.id, name: user.name, email: user.email, createdAt: user.createdAt },
    });
    expect(headers['webhook-id']).toBe(verified.id);
    expect(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(request!.body, headers),
    ).toThrow();

    // What the OpenAPI document's `webhooks` says of this event, body and headers alike.
    const document = await resolvedDocument(app);
    expect(Object.keys(document.webhooks as object).sort()).toEqual([...EVENT_TYPES].sort());
    const operation = document.webhooks['user.created'].post;
    const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
    const validBody = ajv.compile(operation.requestBody.content['application/cloudevents+json'].schema as object);
    expect(validBody(JSON.parse(request!.body)), JSON.stringify(validBody.errors)).toBe(true);
    for (const header of operation.parameters as { name: string; schema: object }[]) {
      const valid = ajv.compile(header.schema);
      expect(valid(headers[header.name]), `${header.name}: ${JSON.stringify(valid.errors)}`).toBe(true);
    }
    await until('delivered', async () => (await deliveriesOf(sub.id))[0]?.status === 'delivered');
  });

  it('is retried with the same webhook-id until a 2xx, and is dead after the last step of the schedule', async () => {
    const flaky = await subscribe('/flaky');
    const down = await subscribe('/down');
    await createUser(app);
    await until('three attempts at /flaky', () => at('/flaky').length >= 3);
    expect(new Set(at('/flaky').map((r) => r.headers['webhook-id'])).size).toBe(1);
    await until('delivered', async () => (await deliveriesOf(flaky.id))[0]?.status === 'delivered');
    expect((await deliveriesOf(flaky.id))[0]).toMatchObject({ attempts: 3, last_response_status: 200 });

    await until('dead', async () => (await deliveriesOf(down.id))[0]?.status === 'dead');
    expect((await deliveriesOf(down.id))[0]).toMatchObject({ attempts: 3, last_response_status: 503 });
    expect(at('/down')).toHaveLength(3);
    const gaps = at('/down')
      .slice(1)
      .map((r, i) => r.at - at('/down')[i]!.at);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(100); // 150 ms ± 20%, less the clock's grain
  });

  it('is in the delivery log, and is sent again on request with the same webhook-id', async () => {
    const down = await subscribe('/down');
    const user = await createUser(app);
    await until('dead', async () => (await deliveriesOf(down.id))[0]?.status === 'dead');
    const log = await api({ method: 'GET', url: `/api/v1/webhook-subscriptions/${down.id}/deliveries?status=dead` });
    expect(log.statusCode, log.body).toBe(200);
    const page = log.json<{ content: Record<string, unknown>[]; totalElements: number }>();
    expect(page.totalElements).toBe(1);
    const [entry] = page.content;
    expect(entry).toMatchObject({
      eventType: 'user.created',
      status: 'dead',
      attempts: 3,
      lastResponseStatus: 503,
      lastError: 'the receiver answered 503',
      nextAttemptAt: null,
    });
    const { rows } = await sql<{
      id: string;
    }>`select id::text as id from events where subject = ${`users/${user.id}`}`.execute(app.db);
    expect(entry!.eventId).toBe(rows[0]!.id);
    expect(
      (await api({ method: 'GET', url: `/api/v1/webhook-subscriptions/${down.id}/deliveries?status=delivered` })).json<{
        totalElements: number;
      }>().totalElements,
    ).toBe(0);

    const before = at('/down').length;
    const again = await api({
      method: 'POST',
      url: `/api/v1/webhook-subscriptions/${down.id}/deliveries/${String(entry!.id)}/redelivery`,
    });
    expect(again.statusCode, again.body).toBe(202);
    await until('sent again', () => at('/down').length > before);
    expect(at('/down').at(-1)!.headers['webhook-id']).toBe(entry!.eventId);

    const other = await subscribe('/ok/other');
    const wrong = await api({
      method: 'POST',
      url: `/api/v1/webhook-subscriptions/${other.id}/deliveries/${String(entry!.id)}/redelivery`,
    });
    expect(wrong.statusCode).toBe(404);
    expect((await api({ method: 'GET', url: '/api/v1/webhook-subscriptions/987654/deliveries' })).statusCode).toBe(404);
  });

  it('is counted in the metrics: attempts by outcome, the backlog and its age', async () => {
    const text = await app.metrics.metrics();
    expect(text).toMatch(/^webhook_deliveries_total\{outcome="delivered"\} [1-9]\d*$/m);
    expect(text).toMatch(/^webhook_deliveries_total\{outcome="failed"\} [1-9]\d*$/m);
    expect(text).toMatch(/^webhook_deliveries_total\{outcome="dead"\} [1-9]\d*$/m);
    expect(text).toMatch(/^webhook_pending \d+$/m);
    expect(text).toMatch(/^webhook_oldest_pending_seconds \d+(\.\d+)?(e[+-]\d+)?$/m);
    await sql`update webhook_deliveries set status = 'failed', next_attempt_at = now() + interval '1 hour',
      created_at = now() - interval '90 seconds' where id = (select min(id) from webhook_deliveries)`.execute(app.db);
    const after = await app.metrics.metrics();
    expect(Number(/^webhook_pending (\d+)$/m.exec(after)?.[1])).toBeGreaterThanOrEqual(1);
    expect(Number(/^webhook_oldest_pending_seconds (\S+)$/m.exec(after)?.[1])).toBeGreaterThanOrEqual(90);
  });

  it('410 disables the subscription; a redirect is not followed; a receiver too slow times out', async () => {
    const gone = await subscribe('/gone');
    const redirect = await subscribe('/redirect');
    const slow = await subscribe('/slow');
    const okBefore = at('/ok').length;
    await createUser(app);
    await until('disabled', async () => {
      const one = await api({ method: 'GET', url: `/api/v1/webhook-subscriptions/${gone.id}` });
      return !one.json<{ enabled: boolean }>().enabled;
    });
    await until('redirect failed', async () => (await deliveriesOf(redirect.id))[0]?.last_response_status === 302);
    expect(at('/ok')).toHaveLength(okBefore);
    await until('slow failed', async () => (await deliveriesOf(slow.id))[0]?.last_error !== null);
    expect((await deliveriesOf(slow.id))[0]?.last_error).toMatch(/abort|timeout/i);

    // Disabled: the next event is not queued for it.
    await createUser(app);
    await new Promise((r) => setTimeout(r, 300));
    expect(at('/gone')).toHaveLength(1);
    expect(await deliveriesOf(gone.id)).toHaveLength(1);
  });

  it('goes out in event order per subject, and one failing subject does not hold up another', async () => {
    await subscribe('/ordered', ['user.created', 'user.updated']);
    const blocked = await createUser(app, { name: 'Blocked One' });
    const free = await createUser(app, { name: 'Free One' });
    const patch = await api({ method: 'PATCH', url: `/api/v1/users/${blocked.id}`, payload: { name: 'Blocked Two' } });
    expect(patch.statusCode).toBe(200);
    await until('the update delivered', () => at('/ordered').some((r) => r.body.includes('"name":"Blocked Two"')));
    const subjects = at('/ordered').map((r) => {
      const e = JSON.parse(r.body) as { subject: string; type: string };
      return `${e.type} ${e.subject}`;
    });
    // users/<blocked>: created (failed twice) before updated; users/<free> not held up by it.
    const createdBlocked = subjects.lastIndexOf(`user.created users/${blocked.id}`);
    const updatedBlocked = subjects.indexOf(`user.updated users/${blocked.id}`);
    const createdFree = subjects.indexOf(`user.created users/${free.id}`);
    expect(createdBlocked).toBeLessThan(updatedBlocked);
    expect(createdFree).toBeLessThan(createdBlocked);
  });
});

describe('what a subscription receives', () => {
  it('nothing when it is made or changed, and no event committed before it', async () => {
    const before = await createUser(app);
    const sub = await subscribe('/ok/late');
    const patched = await api({
      method: 'PATCH',
      url: `/api/v1/webhook-subscriptions/${sub.id}`,
      payload: { description: 'changed' },
    });
    expect(patched.statusCode).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect(at('/ok/late')).toEqual([]);
    const after = await createUser(app);
    await until('the later event', () => at('/ok/late').length > 0);
    await new Promise((r) => setTimeout(r, 200));
    expect(at('/ok/late').map((r) => (JSON.parse(r.body) as { subject: string }).subject)).toEqual([
      `users/${after.id}`,
    ]);
    expect(before.id).not.toBe(after.id);
  });

  it('signatures by both secrets during a rotation’s overlap', async () => {
    const sub = await subscribe('/ok/rotated');
    const rotated = await api({ method: 'POST', url: `/api/v1/webhook-subscriptions/${sub.id}/secret-rotation` });
    expect(rotated.statusCode).toBe(200);
    const fresh = rotated.json<{ secret: string }>().secret;
    await createUser(app);
    const [request] = await until('the delivery', () => (at('/ok/rotated').length > 0 ? at('/ok/rotated') : undefined));
    const headers = request!.headers as Record<string, string>;
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    for (const secret of [sub.secret, fresh]) expect(new Webhook(secret).verify(request!.body, headers)).toBeTruthy();
  });
});

describe('a new delivery, leased at its insert to the instance that wrote it', async () => {
  // The delivery of an event that creates its subject: its dispatcher sends it after the commit
  // without a claim statement. A later event of the subject is claimed as before, once the
  // earlier one is done (the order rule); nothing is leased where no dispatcher runs, and what
  // is not sent by shutdown, or waited in hand for half its lease, is given back.
  const settings = {
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_POLL_MS: '50',
    WEBHOOK_TIMEOUT_MS: '1000',
    WEBHOOK_RETRY_SCHEDULE: '1h',
  };
  const writer = await buildTestApp({ ...settings, WEBHOOK_DISPATCHER: 'true' }, { resolveHost });
  const writerApi = asAdmin(writer.app);
  const subscribeOn = async (on: typeof writerApi, path: string) => {
    const made = await on({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      payload: { url: `${base}${path}`, events: ['user.*'] },
    });
    expect(made.statusCode, made.body).toBe(201);
    return made.json<{ id: number }>().id;
  };
  const rowsOf = async (db: typeof app.db, subscriptionId: number) =>
    (
      await sql<{ status: string; attempts: number; leased: boolean; at_insert: boolean | null }>`
        select status, attempts, leased_until is not null as leased, last_attempt_at = created_at as at_insert
          from webhook_deliveries where subscription_id = ${subscriptionId} order by id`.execute(db)
    ).rows;

  it('is leased in the statement that inserts it; a later one of its subject waits, unleased, for the claim', async () => {
    const sub = await subscribeOn(writerApi, '/slow');
    const slowBefore = at('/slow').length;
    const user = await createUser(writer.app);
    // The receiver hangs, so nothing has been recorded yet: these are the insert's values.
    expect(await rowsOf(writer.app.db, sub)).toEqual([
      { status: 'pending', attempts: 1, leased: true, at_insert: true },
    ]);
    await until('the attempt', () => at('/slow').length > slowBefore);
    const patched = await writerApi({ method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'Later' } });
    expect(patched.statusCode).toBe(200);
    expect((await rowsOf(writer.app.db, sub))[1]).toEqual({
      status: 'pending',
      attempts: 0,
      leased: false,
      at_insert: null,
    });
    // The first times out and is retried in an hour: the second still waits for it, unsent.
    await until('the first failed', async () => (await rowsOf(writer.app.db, sub))[0]?.status === 'failed');
    await new Promise((r) => setTimeout(r, 200));
    expect((await rowsOf(writer.app.db, sub))[1]).toMatchObject({ attempts: 0, leased: false });
    expect(at('/slow').filter((r) => r.body.includes('"name":"Later"'))).toEqual([]);
  });

  it('is not leased where no dispatcher runs', async () => {
    const quiet = await buildTestApp({ ...settings, WEBHOOK_DISPATCHER: 'false' }, { resolveHost });
    const sub = await subscribeOn(asAdmin(quiet.app), '/ok/quiet');
    await createUser(quiet.app);
    expect(await rowsOf(quiet.app.db, sub)).toEqual([
      { status: 'pending', attempts: 0, leased: false, at_insert: null },
    ]);
  });

  it('is given back when it waited in hand for half its lease, and then claimed like any other', async () => {
    // Time-out 1 s, so a lease of 6 s: the dispatcher's 32 slots free every second, and what
    // waits in hand past 3 s is given back (its lease would lapse before it is sent) and claimed
    // again by the scan. Each delivery is still attempted once.
    const busy = await buildTestApp({ ...settings, WEBHOOK_DISPATCHER: 'true' }, { resolveHost });
    const busyApi = asAdmin(busy.app);
    const subs: number[] = [];
    for (let i = 0; i < 160; i++) subs.push(await subscribeOn(busyApi, `/slow/busy/${i}`));
    await createUser(busy.app);
    const attempted = () => rx.received.filter((r) => r.path.startsWith('/slow/busy/'));
    await until('every delivery attempted', () => attempted().length >= 160, 15_000);
    const { rows } = await sql<{ attempts: number; at_insert: boolean }>`
      select attempts, last_attempt_at = created_at as at_insert from webhook_deliveries`.execute(busy.app.db);
    expect(rows).toHaveLength(160);
    expect(rows.every((r) => r.attempts === 1)).toBe(true);
    expect(rows.filter((r) => r.at_insert).length).toBeGreaterThanOrEqual(64); // sent as leased at insert
    expect(rows.filter((r) => !r.at_insert).length).toBeGreaterThan(0); // given back, then claimed
    expect(new Set(attempted().map((r) => r.path)).size).toBe(160);
    expect(attempted()).toHaveLength(160);
  });

  it('is given back at shutdown when it was not sent: due again at once, for any instance', async () => {
    // More deliveries of one event than the dispatcher has slots for (32), all to a receiver
    // that hangs: those beyond the slots wait in hand until the instance closes.
    const closing = await buildTestApp({ ...settings, WEBHOOK_DISPATCHER: 'true' }, { resolveHost });
    const closingApi = asAdmin(closing.app);
    const subs: number[] = [];
    for (let i = 0; i < 40; i++) subs.push(await subscribeOn(closingApi, `/slow/${i}`));
    await createUser(closing.app);
    await until('the slots full', () => rx.received.filter((r) => r.path.startsWith('/slow/')).length >= 32);
    await closing.app.close();
    const rows = (await Promise.all(subs.map((id) => rowsOf(closing.app.db, id)))).flat();
    expect(rows).toHaveLength(40);
    const givenBack = rows.filter((r) => r.status === 'pending');
    expect(givenBack.length).toBeGreaterThan(0);
    expect(givenBack.every((r) => r.attempts === 0 && !r.leased)).toBe(true);
    expect(rows.filter((r) => r.status === 'failed')).toHaveLength(40 - givenBack.length);
  });

  it('is not given back once it was sent again on request and claimed elsewhere: that lease is the other instance’s', async () => {
    // As above, 40 deliveries of one event and 32 slots: 8 wait in hand. Half of those are sent
    // again on request and claimed by another instance (the claim function it runs) before this
    // one closes: its give-back must leave their new lease alone, and still give back the rest.
    const closing = await buildTestApp(
      { ...settings, WEBHOOK_DISPATCHER: 'true', WEBHOOK_TIMEOUT_MS: '4000' },
      { resolveHost },
    );
    const closingApi = asAdmin(closing.app);
    const subs: number[] = [];
    for (let i = 0; i < 40; i++) subs.push(await subscribeOn(closingApi, `/slow/elsewhere/${i}`));
    await createUser(closing.app);
    const sent = () => rx.received.filter((r) => r.path.startsWith('/slow/elsewhere/'));
    await until('the slots full', () => sent().length >= 32);
    const inHand = subs.filter((_, i) => !sent().some((r) => r.path === `/slow/elsewhere/${i}`));
    expect(inHand).toHaveLength(8);
    const taken = inHand.slice(0, 4);
    const ids: string[] = [];
    for (const sub of taken) {
      const { rows } = await sql<{ id: string }>`
        select id::text as id from webhook_deliveries where subscription_id = ${sub}`.execute(closing.app.db);
      const again = await closingApi({
        method: 'POST',
        url: `/api/v1/webhook-subscriptions/${sub}/deliveries/${rows[0]!.id}/redelivery`,
      });
      expect(again.statusCode, again.body).toBe(202);
      ids.push(rows[0]!.id);
    }
    const claimed = await sql<{ id: string }>`
      select id::text as id from webhook_claim(${`{${ids.join(',')}}`}::bigint[], null, 60000)`.execute(closing.app.db);
    expect(claimed.rows).toHaveLength(4);

    await closing.app.close();
    const rowsOfSubs = async (list: number[]) =>
      (await Promise.all(list.map((id) => rowsOf(closing.app.db, id)))).flat();
    expect(await rowsOfSubs(taken)).toEqual(
      taken.map(() => ({ status: 'pending', attempts: 1, leased: true, at_insert: false })),
    );
    expect(await rowsOfSubs(inHand.slice(4))).toEqual(
      inHand.slice(4).map(() => ({ status: 'pending', attempts: 0, leased: false, at_insert: null })),
    );
  });
});

describe('a receiver that does not answer', async () => {
  // Time-out 5 s: while one delivery hangs, the others must not wait for it.
  const patient = await buildTestApp(
    {
      WEBHOOK_DISPATCHER: 'true',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_MS: '1000',
      WEBHOOK_TIMEOUT_MS: '5000',
    },
    { resolveHost },
  );
  const patientApi = asAdmin(patient.app);

  it('holds up no other delivery while it hangs', async () => {
    for (const path of ['/slow', '/ok/beside']) {
      const made = await patientApi({
        method: 'POST',
        url: '/api/v1/webhook-subscriptions',
        payload: { url: `${base}${path}`, events: ['user.created'] },
      });
      expect(made.statusCode).toBe(201);
    }
    const slowBefore = at('/slow').length;
    const first = await createUser(patient.app);
    await until('the hanging request', () => at('/slow').length > slowBefore);
    const second = await createUser(patient.app);
    const sent = Date.now();
    await until('the other delivery', () =>
      at('/ok/beside').some((r) => r.body.includes(`"subject":"users/${second.id}"`)),
    );
    expect(Date.now() - sent).toBeLessThan(2000);
    expect(at('/ok/beside').some((r) => r.body.includes(`"subject":"users/${first.id}"`))).toBe(true);
  });
});

describe('the address connected to, at every attempt', async () => {
  // Private networks refused here. The name resolves to a public address when the subscription
  // is made and to 127.0.0.1 afterwards (DNS rebinding): the delivery must not connect.
  let calls = 0;
  const rebinding = (host: string) => {
    if (host === 'public.example.com') return Promise.resolve(['93.184.215.14']);
    if (host !== 'rebind.example.com') return Promise.reject(new Error(`ENOTFOUND ${host}`));
    calls++;
    return Promise.resolve(calls === 1 ? ['93.184.215.14'] : ['127.0.0.1']);
  };
  const strict = await buildTestApp(
    { WEBHOOK_DISPATCHER: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false', WEBHOOK_POLL_MS: '50' },
    { resolveHost: rebinding },
  );
  const strictApi = asAdmin(strict.app);

  it('refuses a host that now resolves to 127.0.0.1, and an address literal that is private, saying why', async () => {
    const created = await strictApi({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      payload: { url: 'https://rebind.example.com/hook', events: ['*'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const literal = await strictApi({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      payload: { url: 'https://public.example.com/literal', events: ['*'] },
    });
    expect(literal.statusCode, literal.body).toBe(201);
    // Stored before a rule change, say: the literal is refused at delivery all the same.
    await sql`update webhook_subscriptions set url = 'https://[::ffff:127.0.0.1]:9/x' where id = ${literal.json<{ id: number }>().id}`.execute(
      strict.app.db,
    );
    await createUser(strict.app);
    const rows = await until('both attempts failed', async () => {
      const { rows } = await sql<{ subscription_id: number; status: string; last_error: string | null }>`
        select subscription_id, status, last_error from webhook_deliveries order by subscription_id`.execute(
        strict.app.db,
      );
      return rows.length === 2 && rows.every((r) => r.last_error !== null) ? rows : undefined;
    });
    expect(rows[0]!.status).toBe('failed');
    // Why, but not which private address the name resolved to (the log is read through the API).
    expect(rows[0]!.last_error).toMatch(/rebind\.example\.com does not resolve to public addresses only/);
    expect(rows[0]!.last_error).not.toContain('127.0.0.1');
    expect(rows[1]!.last_error).toMatch(/::ffff:7f00:1 is not a public address/); // as the URL normalises it
  });
});
