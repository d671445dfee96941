// Secrets at rest (docs/webhooks.md "Secrets at rest", ENCRYPTION_KEY). Webhook secrets and the
// answers stored under an Idempotency-Key are in the database only encrypted (AES-256-GCM); the
// fingerprint of a keyed request is an HMAC, not a hash a reader could test passwords against;
// a rotation (ENCRYPTION_KEY new, ENCRYPTION_KEY_PREVIOUS old) re-encrypts everything in the
// background, and rows written in clear before are encrypted at start-up. Deliveries are still
// signed with the plain secret (verified by the `standardwebhooks` library). Both engines.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { sql } from 'kysely';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { answerBinding } from '../../src/crypto/encryption.js';
import { rewriteAnswerBodies } from '../../src/crypto/reencrypt.repository.js';
import { loadConfig } from '../../src/config/config.js';
import { asAdmin, aUserRequest, createUser } from '../support/factories.js';
import { buildTestApp, engine, TEST_ENCRYPTION_KEY, testConfig } from '../support/test-app.js';
import { until } from '../support/until.js';

const received: { path: string; headers: IncomingMessage['headers']; body: string }[] = [];
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    received.push({ path: req.url ?? '/', headers: req.headers, body });
    res.writeHead(204).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
/** A URL of its own for each subscription: every subscription here gets every user.created. */
const urlOf = (name: string) => `${receiverUrl}/${name}`;
afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});

const settings = {
  WEBHOOK_DISPATCHER: 'true',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_POLL_MS: '50',
};
const { app } = await buildTestApp(settings);
const api = asAdmin(app);
/** The subject of the suite's admin token (test/support/tokens.ts). */
const ADMIN_SUBJECT = '999999999';

/** Every row of the tables that hold secrets, as text: what a dump would show. */
async function dump(db: FastifyInstance['db']): Promise<string> {
  const { rows } = await sql<{ t: string }>`
    select row_to_json(s)::text as t from webhook_subscriptions s
    union all select row_to_json(k)::text from idempotency_keys k`.execute(db);
  return rows.map((r) => r.t).join('\n');
}

async function subscribe(target: typeof api, name: string) {
  const key = `"${randomUUID()}"`;
  const payload = { url: urlOf(name), events: ['user.created'] };
  const made = await target({
    method: 'POST',
    url: '/api/v1/webhook-subscriptions',
    headers: { 'idempotency-key': key },
    payload,
  });
  expect(made.statusCode, made.body).toBe(201);
  return { key, made, payload, ...made.json<{ id: number; secret: string }>() };
}

/** A delivery for the user `id` arrived at `name`, signed so that `secret` verifies it. */
async function deliveredSignedBy(name: string, id: number, secret: string): Promise<void> {
  const delivery = await until('the delivery', () =>
    received.find((r) => r.path === `/hook/${name}` && r.body.includes(`"subject":"users/${String(id)}"`)),
  );
  expect(() =>
    new Webhook(secret.slice('whsec_'.length)).verify(delivery.body, {
      'webhook-id': String(delivery.headers['webhook-id']),
      'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
      'webhook-signature': String(delivery.headers['webhook-signature']),
    }),
  ).not.toThrow();
}

/** Values of both tables not stored with `prefix` (the current form under the current key). */
async function notInForm(prefix: string): Promise<string[]> {
  const { rows } = await sql<{ value: string }>`
    select secret as value from webhook_subscriptions where left(secret, ${prefix.length}) <> ${prefix}
    union all select previous_secret from webhook_subscriptions
     where previous_secret is not null and left(previous_secret, ${prefix.length}) <> ${prefix}
    union all select body from idempotency_keys
     where body is not null and left(body, ${prefix.length}) <> ${prefix} and expires_at > now()`.execute(app.db);
  return rows.map((r) => r.value);
}

/**
 * Another instance on the same database, with its own keys; closed by the caller. Its log lines
 * go to `logs` when given, and `plugins` are registered after its own.
 */
async function instanceWith(
  env: Record<string, string | undefined>,
  db = app.db,
  logs?: Record<string, unknown>[],
  plugins: FastifyPluginAsync[] = [],
): Promise<FastifyInstance> {
  const base = testConfig(settings);
  const keys = loadConfig({ NODE_ENV: 'test', ...env });
  const logger =
    logs === undefined
      ? undefined
      : pino(
          { level: 'info' },
          new Writable({
            write(chunk: Buffer, _encoding, callback) {
              for (const line of chunk.toString().split('\n'))
                if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
              callback();
            },
          }),
        );
  return buildApp({ config: { ...base, encryption: keys.encryption }, db, plugins, ...(logger ? { logger } : {}) });
}

describe('a subscription secret', () => {
  it('is stored encrypted, in the row and in the stored answer of its creation; deliveries are signed with it', async () => {
    const sub = await subscribe(api, 'first');
    expect(sub.secret).toMatch(/^whsec_/);
    const text = await dump(app.db);
    expect(text).not.toContain(sub.secret);
    expect(text).not.toContain(sub.secret.slice('whsec_'.length));
    const { rows } = await sql<{ secret: string }>`
      select secret from webhook_subscriptions where id = ${sub.id}`.execute(app.db);
    expect(rows[0]!.secret).toMatch(/^enc2\.[\w-]{8}\./);

    const replay = await api({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { 'idempotency-key': sub.key },
      payload: sub.payload,
    });
    expect(replay.statusCode).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toBe(sub.made.body);

    const user = await createUser(app);
    await deliveredSignedBy('first', user.id, sub.secret);
  });

  it('after a rotation, both secrets are stored encrypted and both sign', async () => {
    const sub = await subscribe(api, 'rotated');
    const rotated = await api({ method: 'POST', url: `/api/v1/webhook-subscriptions/${sub.id}/secret-rotation` });
    expect(rotated.statusCode).toBe(200);
    const { secret } = rotated.json<{ secret: string }>();
    const text = await dump(app.db);
    for (const s of [sub.secret, secret]) expect(text).not.toContain(s.slice('whsec_'.length));
    const user = await createUser(app);
    await deliveredSignedBy('rotated', user.id, secret);
    await deliveredSignedBy('rotated', user.id, sub.secret);
  });
});

describe('a ciphertext moved to another row', () => {
  it("does not sign another subscription's deliveries: a secret copied into its row does not decrypt there", async () => {
    const from = await subscribe(api, 'copied-from');
    const into = await subscribe(api, 'copied-into');
    await sql`
      update webhook_subscriptions set secret = (select secret from webhook_subscriptions where id = ${from.id})
       where id = ${into.id}`.execute(app.db);
    const user = await createUser(app);
    await deliveredSignedBy('copied-from', user.id, from.secret);
    const failed = await until('the failed attempt', async () => {
      const page = await api({ method: 'GET', url: `/api/v1/webhook-subscriptions/${into.id}/deliveries` });
      return page.json<{ content: { lastError: string | null }[] }>().content.find((d) => d.lastError !== null);
    });
    expect(failed.lastError).toContain('cannot decrypt');
    expect(received.filter((r) => r.path === '/hook/copied-into')).toEqual([]);

    await api({ method: 'DELETE', url: `/api/v1/webhook-subscriptions/${into.id}` });
  });

  it("does not replay under another key: an answer copied into another key's row is refused, not sent", async () => {
    const keyed = async (key: string, payload: Record<string, unknown>) => {
      const made = await api({
        method: 'POST',
        url: '/api/v1/users',
        headers: { 'idempotency-key': `"${key}"` },
        payload,
      });
      expect(made.statusCode, made.body).toBe(201);
      return made;
    };
    const [a, b] = [randomUUID(), randomUUID()];
    const own = aUserRequest();
    const first = await keyed(a, aUserRequest());
    await keyed(b, own);
    await sql`
      update idempotency_keys set body = (select body from idempotency_keys where subject = ${ADMIN_SUBJECT} and key = ${a})
       where subject = ${ADMIN_SUBJECT} and key = ${b}`.execute(app.db);
    const replay = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'idempotency-key': `"${b}"` },
      payload: own,
    });
    expect(replay.body).not.toBe(first.body);
    expect(replay.statusCode, replay.body).toBe(503);
    await sql`delete from idempotency_keys where subject = ${ADMIN_SUBJECT} and key = ${b}`.execute(app.db);
  });
});

describe('the background pass', () => {
  it('leaves a value no configured key decrypts as it is, rewrites the rest, and records no finished pass', async () => {
    const { rows: made } = await sql<{ id: number }>`
      insert into webhook_subscriptions (url, events, secret)
      values (${urlOf('lost-key')}, ${['user.created']}, ${'enc2.AAAAAAAA.' + randomBytes(40).toString('base64url')})
      returning id`.execute(app.db);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    await sql`
      insert into webhook_subscriptions (url, events, secret) values (${urlOf('in-clear')}, ${['user.created']}, ${secret})`.execute(
      app.db,
    );
    await sql`delete from encryption_passes`.execute(app.db);
    const next = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    expect(await next.secretsReencrypted).toMatchObject({ subscriptions: 1, undecryptable: 1 });
    expect(await dump(app.db)).not.toContain(secret.slice('whsec_'.length));
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from encryption_passes`.execute(app.db);
    expect(rows[0]!.n).toBe(0);
    await next.close();
    await sql`delete from webhook_subscriptions where id = ${made[0]!.id}`.execute(app.db);
  });

  it('converts at a later start what an instance of the earlier version wrote after the first pass (a rolling upgrade)', async () => {
    const first = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    expect(await first.secretsReencrypted).not.toHaveProperty('undecryptable');
    await first.close();
    // Written after that pass by an instance still on the earlier version: in clear.
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const { rows } = await sql<{ id: number }>`
      insert into webhook_subscriptions (url, events, secret) values (${urlOf('upgrade')}, ${['user.created']}, ${secret})
      returning id`.execute(app.db);
    const key = randomUUID();
    const answer = JSON.stringify({ written: 'by the earlier version' });
    await sql`
      insert into idempotency_keys (subject, key, fingerprint, status, headers, body, expires_at)
      values (${ADMIN_SUBJECT}, ${key}, 'f', 200, '{}', ${answer}, now() + interval '1 hour')`.execute(app.db);

    const second = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    const counts = await second.secretsReencrypted;
    const dumped = await dump(app.db);
    await second.close();

    expect(counts).toEqual({ subscriptions: 1, answers: 1 });
    expect(dumped).not.toContain(secret.slice('whsec_'.length));
    expect(dumped).not.toContain('by the earlier version');
    await sql`delete from webhook_subscriptions where id = ${rows[0]!.id}`.execute(app.db);
    await sql`delete from idempotency_keys where key = ${key}`.execute(app.db);
  });

  it('once settled (a day and an hour after the first pass of the form), walks the secrets only', async () => {
    const first = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    await first.secretsReencrypted;
    await first.close();
    await sql`update encryption_passes set started_at = now() - interval '25 hours 1 minute'`.execute(app.db);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const { rows } = await sql<{ id: number }>`
      insert into webhook_subscriptions (url, events, secret) values (${urlOf('settled')}, ${['user.created']}, ${secret})
      returning id`.execute(app.db);
    const key = randomUUID();
    await sql`
      insert into idempotency_keys (subject, key, fingerprint, status, headers, body, expires_at)
      values (${ADMIN_SUBJECT}, ${key}, 'f', 200, '{}', ${'{"late":"answer"}'}, now() + interval '1 hour')`.execute(
      app.db,
    );

    const settled = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    const counts = await settled.secretsReencrypted;
    const dumped = await dump(app.db);
    await settled.close();

    expect(counts).toEqual({ subscriptions: 1, answers: 0, settled: true });
    expect(dumped).not.toContain(secret.slice('whsec_'.length));
    expect(dumped).toContain('late'); // an answer is not read once settled: it is gone at its expiry
    await sql`delete from webhook_subscriptions where id = ${rows[0]!.id}`.execute(app.db);
    await sql`delete from idempotency_keys where key = ${key}`.execute(app.db);
  });

  it('loads the webhook secrets a batch at a time', async () => {
    await sql`delete from encryption_passes`.execute(app.db);
    const { rows: made } = await sql<{ id: number }>`
      insert into webhook_subscriptions (url, events, secret, enabled)
      select ${urlOf('batch')} || n, ${['user.created']}, 'whsec_' || md5(n::text), false
        from generate_series(1, 501) as n
      returning id`.execute(app.db);
    const loads: number[] = [];
    let loading: unknown;
    const watched = app.db.withPlugin({
      transformQuery: ({ node, queryId }) => {
        const text = node.kind === 'RawNode' ? node.sqlFragments.join('?') : '';
        if (text.includes('select id, secret, previous_secret from webhook_subscriptions')) loading = queryId;
        return node;
      },
      transformResult: async ({ result, queryId }) => {
        if (queryId === loading) loads.push(result.rows.length);
        return result;
      },
    });

    const next = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }, watched);
    const counts = await next.secretsReencrypted;
    await next.close();

    expect(counts.subscriptions).toBe(501);
    expect(loads).toEqual([500, 1, 0]);
    await sql`delete from webhook_subscriptions where id in (${sql.join(made.map((r) => r.id))})`.execute(app.db);
  });

  it('rewrites the answers of a batch in one statement, each only if it still holds the value read', async () => {
    const keys = Array.from({ length: 3 }, () => randomUUID());
    for (const key of keys)
      await sql`
        insert into idempotency_keys (subject, key, fingerprint, status, headers, body, expires_at)
        values (${ADMIN_SUBJECT}, ${key}, 'f', 200, '{}', ${`read ${key}`}, now() + interval '1 hour')`.execute(app.db);
    await sql`update idempotency_keys set body = 'changed meanwhile' where key = ${keys[2]!}`.execute(app.db);
    let statements = 0;
    const counted = app.db.withPlugin({
      transformQuery: ({ node }) => {
        statements++;
        return node;
      },
      transformResult: async ({ result }) => result,
    });

    const written = await rewriteAnswerBodies(
      counted,
      keys.map((key) => ({ subject: ADMIN_SUBJECT, key, body: `read ${key}`, next: `next ${key}` })),
    );
    const { rows } = await sql<{ body: string }>`
      select body from idempotency_keys where key in (${sql.join(keys)}) order by body`.execute(app.db);

    expect(statements).toBe(1);
    expect(written).toBe(2);
    expect(rows.map((r) => r.body)).toEqual(['changed meanwhile', `next ${keys[0]!}`, `next ${keys[1]!}`].sort());
    await sql`delete from idempotency_keys where key in (${sql.join(keys)})`.execute(app.db);
  });
});

describe('a request sent with an Idempotency-Key', () => {
  it('is fingerprinted by an HMAC: the stored fingerprint is not the hash of the request, so passwords cannot be guessed from it', async () => {
    const key = randomUUID();
    const body = JSON.stringify(aUserRequest({ password: 'correct horse battery staple' }));
    const created = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      payload: body,
    });
    expect(created.statusCode, created.body).toBe(201);
    const { rows } = await sql<{ fingerprint: string; body: string }>`
      select fingerprint, body from idempotency_keys where key = ${key}`.execute(app.db);
    const plain = createHash('sha256').update('POST /api/v1/users\n').update(body).digest('base64url');
    expect(rows[0]!.fingerprint).not.toBe(plain);
    expect(rows[0]!.fingerprint).toMatch(/^h1\.[\w-]{8}\.[\w-]{43}$/);
    expect(rows[0]!.body).toMatch(/^enc2\./);
    expect(rows[0]!.body).not.toContain(created.json<{ email: string }>().email);
    // The same request replays; another body under the key is still told apart.
    const again = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      payload: body,
    });
    expect(again.body).toBe(created.body);
    const other = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      payload: body.replace('correct horse', 'wrong horse'),
    });
    expect(other.statusCode).toBe(422);
  });
});

describe('ENCRYPTION_KEY', () => {
  it('encrypts at start-up what was stored in clear before, and a retry of a key stored then still replays', async () => {
    // As an earlier version wrote them: the secret as issued, the answer as sent, the fingerprint
    // a plain SHA-256 of the request.
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const { rows } = await sql<{ id: number }>`
      insert into webhook_subscriptions (url, events, secret) values (${urlOf('legacy')}, ${['user.created']}, ${secret})
      returning id`.execute(app.db);
    const key = randomUUID();
    const payload = JSON.stringify({ url: urlOf('legacy'), events: ['user.created'] });
    const answer = JSON.stringify({ id: rows[0]!.id, secret });
    const fingerprint = createHash('sha256')
      .update('POST /api/v1/webhook-subscriptions\n')
      .update(payload)
      .digest('base64url');
    await sql`
      insert into idempotency_keys (subject, key, fingerprint, status, headers, body, expires_at)
      values ('999999999', ${key}, ${fingerprint}, 201, '{"content-type":"application/json; charset=utf-8"}', ${answer},
              now() + interval '1 hour')`.execute(app.db);

    // As a database of that version: no pass recorded (the table came with this version).
    await sql`delete from encryption_passes`.execute(app.db);
    const upgraded = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    const counts = await upgraded.secretsReencrypted;
    expect(counts).toMatchObject({ subscriptions: 1, answers: 1 });
    const text = await dump(app.db);
    expect(text).not.toContain(secret.slice('whsec_'.length));
    const replay = await asAdmin(upgraded)({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      payload,
    });
    expect(replay.statusCode, replay.body).toBe(201);
    expect(replay.body).toBe(answer);
    await upgraded.close();
    const user = await createUser(app);
    await deliveredSignedBy('legacy', user.id, secret);
  });

  /**
   * The suite's database with a pass held once it has loaded its first batch of secrets, until
   * `release()`: a pass caught between reading rows and rewriting them.
   */
  function heldAtFirstLoad() {
    const state = { held: false };
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let loading: unknown;
    const db = app.db.withPlugin({
      transformQuery: ({ node, queryId }) => {
        const text = node.kind === 'RawNode' ? node.sqlFragments.join('?') : '';
        if (text.includes('select id, secret, previous_secret from webhook_subscriptions')) loading = queryId;
        return node;
      },
      transformResult: async ({ result, queryId }) => {
        if (!state.held && queryId === loading) {
          state.held = true;
          await gate;
        }
        return result;
      },
    });
    return {
      db,
      state,
      release: () => {
        release();
      },
    };
  }
  const finished = (logs: Record<string, unknown>[]) =>
    logs.filter((l) => String(l.msg).startsWith('secrets at rest: every value is encrypted'));
  /** Every value back under the suite's key from `from`, for the tests after this one. */
  async function backFrom(from: string): Promise<void> {
    const back = await instanceWith({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS: from });
    await back.secretsReencrypted;
    await back.close();
    expect(await notInForm(back.encryption.currentPrefix)).toEqual([]);
  }

  it('says every value is under the current key only after a pass that ran to its end, not one its close stopped', async () => {
    await subscribe(api, 'stopped-pass');
    const next = randomBytes(32).toString('base64');
    const env = { ENCRYPTION_KEY: next, ENCRYPTION_KEY_PREVIOUS: TEST_ENCRYPTION_KEY };
    const hold = heldAtFirstLoad();
    // (Released by a hook of close's that runs after the instance's own: the pass has been told to
    // stop by then, and the statement it holds frees the connection that close may need.)
    const releasedOnClose = fp(async (instance) => {
      instance.addHook('preClose', (done) => {
        hold.release();
        done();
      });
    });
    const stoppedLogs: Record<string, unknown>[] = [];
    const stopped = await instanceWith(env, hold.db, stoppedLogs, [releasedOnClose]);
    try {
      await until('the pass to load the secrets', () => hold.state.held || undefined);
      await stopped.close();
      expect(await stopped.secretsReencrypted).toEqual({ subscriptions: 0, answers: 0 });
      expect(await notInForm(stopped.encryption.currentPrefix)).not.toEqual([]);
      expect(finished(stoppedLogs)).toEqual([]);

      // Left to finish, the same pass says so, and leaves nothing under the old key.
      const runLogs: Record<string, unknown>[] = [];
      const running = await instanceWith(env, app.db, runLogs);
      try {
        expect((await running.secretsReencrypted).subscriptions).toBeGreaterThanOrEqual(1);
        expect(finished(runLogs)).toHaveLength(1);
        expect(await notInForm(running.encryption.currentPrefix)).toEqual([]);
      } finally {
        await running.close();
      }
    } finally {
      hold.release();
      await stopped.close(); // (again, if a check above failed first: a second close waits for the first)
      await backFrom(next);
    }
  });

  // (PostgreSQL alone: a pass held between its read and its rewrite holds PGlite's one connection,
  // so nothing else could write meanwhile there.)
  it.runIf(engine === 'postgres')(
    'leaves a secret rotated between its read and its rewrite to the next pass, and says no more than that',
    async () => {
      const sub = await subscribe(api, 'raced-pass');
      const next = randomBytes(32).toString('base64');
      const env = { ENCRYPTION_KEY: next, ENCRYPTION_KEY_PREVIOUS: TEST_ENCRYPTION_KEY };
      const hold = heldAtFirstLoad();
      const logs: Record<string, unknown>[] = [];
      const raced = await instanceWith(env, hold.db, logs);
      try {
        await until('the pass to load the secrets', () => hold.state.held || undefined);
        // An instance still on the old key rotates the secret meanwhile: its old one, stored
        // under the old key, moves to previous_secret.
        const rotated = await api({ method: 'POST', url: `/api/v1/webhook-subscriptions/${sub.id}/secret-rotation` });
        expect(rotated.statusCode).toBe(200);
        hold.release();
        const counts = await raced.secretsReencrypted;
        await raced.close();
        expect(counts.changed).toBeGreaterThanOrEqual(1);
        expect(finished(logs)).toEqual([]);
        expect(logs.some((l) => String(l.msg).startsWith('secrets at rest: some values changed'))).toBe(true);
        expect(await notInForm(raced.encryption.currentPrefix)).not.toEqual([]);
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from encryption_passes where prefix = ${raced.encryption.currentPrefix}`.execute(
          app.db,
        );
        expect(rows[0]?.n).toBe(0);

        // The next pass converts it, and says so.
        const nextLogs: Record<string, unknown>[] = [];
        const after = await instanceWith(env, app.db, nextLogs);
        await after.secretsReencrypted;
        await after.close();
        expect(finished(nextLogs)).toHaveLength(1);
        expect(await notInForm(after.encryption.currentPrefix)).toEqual([]);
      } finally {
        hold.release();
        await raced.close();
        await backFrom(next);
      }
    },
  );

  it('rotates with ENCRYPTION_KEY_PREVIOUS: everything is re-encrypted in the background, and the old key can then go', async () => {
    const sub = await subscribe(api, 'rotation');
    const user = await createUser(app);
    await deliveredSignedBy('rotation', user.id, sub.secret);
    const next = randomBytes(32).toString('base64');

    const rotating = await instanceWith({ ENCRYPTION_KEY: next, ENCRYPTION_KEY_PREVIOUS: TEST_ENCRYPTION_KEY });
    const counts = await rotating.secretsReencrypted;
    expect(counts.subscriptions).toBeGreaterThanOrEqual(1);
    expect(counts.answers).toBeGreaterThanOrEqual(1);
    // The stored answer replays, and the fingerprint made under the old key still matches.
    const replay = await asAdmin(rotating)({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { 'idempotency-key': sub.key },
      payload: sub.payload,
    });
    expect(replay.statusCode).toBe(201);
    expect(replay.body).toBe(sub.made.body);
    const during = await subscribe(asAdmin(rotating), 'during');
    await rotating.close();

    // With the new key alone: every secret and answer decrypts, nothing is left to re-encrypt.
    // A fingerprint made under the old key cannot be checked any more (an HMAC is not
    // re-encrypted): the old key goes once IDEMPOTENCY_TTL_HOURS have passed since the rotation.
    const after = await instanceWith({ ENCRYPTION_KEY: next });
    expect(await after.secretsReencrypted).toEqual({ subscriptions: 0, answers: 0 });
    expect(await notInForm(after.encryption.currentPrefix)).toEqual([]);
    const replayed = await asAdmin(after)({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      headers: { 'idempotency-key': during.key },
      payload: during.payload,
    });
    expect(replayed.statusCode).toBe(201);
    expect(replayed.body).toBe(during.made.body);
    const { rows } = await sql<{ body: string }>`
      select body from idempotency_keys where key = ${sub.key.slice(1, -1)}`.execute(app.db);
    expect(
      after.encryption.decrypt(rows[0]!.body, 'idempotency-answer', answerBinding(ADMIN_SUBJECT, sub.key.slice(1, -1))),
    ).toBe(sub.made.body);
    await app.close(); // the old instance (old key only) stops sending
    const later = await createUser(after);
    await deliveredSignedBy('rotation', later.id, sub.secret);
    await after.close();
  });
});
