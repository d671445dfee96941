// Primary-key reads on a direct connection (src/db/prepared.ts, prepareById; docs/architecture.md,
// "Reads gathered"): a read that finds none of its kind out goes at once, alone; reads that come
// while some are out go together, as one statement, each caller with its own row or its 404; a
// statement that fails fails only the reads it carried. Proved
// through the API on the suite's PostgreSQL, the app's connections through a front on loopback
// that counts the statements they execute (the protocol's Bind messages).
import { createServer, type Socket } from 'node:net';
import { trace } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, createUser } from '../support/factories.js';
import { buildTestApp, engine, testPostgres } from '../support/test-app.js';
import { listening, upstreamFor } from '../support/tcp-front.js';
import { tracedDb } from '../../src/tracing/db-spans.js';
import { findUserById } from '../../src/users/users.repository.js';

const direct = engine === 'postgres' && testPostgres.pooler === 'none' && testPostgres.url !== undefined;

/**
 * A forwarder in front of the suite's PostgreSQL that counts the Bind ('B') messages its clients
 * send: one per statement executed with the extended protocol (every prepared statement).
 */
async function bindCountingFront(): Promise<{ url: string; binds: () => number }> {
  const target = new URL(testPostgres.url!);
  const sockets = new Set<Socket>();
  let binds = 0;
  const server = createServer((client) => {
    const upstream = upstreamFor(client, target, sockets);
    upstream.pipe(client);
    // The first message (startup) has no type byte; each after it is a type byte and a length.
    let started = false;
    let buffered = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const head = started ? 5 : 4;
        if (buffered.length < head) break;
        const length = started ? buffered.readInt32BE(1) + 1 : buffered.readInt32BE(0);
        if (buffered.length < length) break;
        if (started && buffered[0] === 0x42) binds++;
        buffered = buffered.subarray(length);
        started = true;
      }
    });
  });
  server.unref();
  return { url: await listening(server, target), binds: () => binds };
}

const front = direct ? await bindCountingFront() : undefined;
const built = front === undefined ? undefined : await buildTestApp({ DATABASE_URL: front.url });

describe.runIf(built !== undefined)('primary-key reads on a direct connection', () => {
  // A skipped suite's body still runs at collection (on PGlite, behind a pooler): nothing built then.
  const app = built?.app as FastifyInstance;
  const read = (id: number, auth: string) =>
    app.inject({ method: 'GET', url: `/api/v1/users/${id}`, headers: { authorization: auth } });

  it('answers reads of one moment in fewer statements than reads, each caller its own row, a missing one its 404', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => aCustomer(app, 'users:read')));
    expect((await read(users[0]!.id, users[0]!.auth)).statusCode).toBe(200);
    const asked = users.flatMap((user) => Array.from({ length: 5 }, () => user));
    const before = front!.binds();
    const [answers, missing] = await Promise.all([
      Promise.all(asked.map((user) => read(user.id, user.auth))),
      read(999_999_999, users[0]!.auth),
    ]);
    const statements = front!.binds() - before;
    answers.forEach((answer, i) => {
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json<{ id: number }>().id).toBe(asked[i]!.id);
    });
    expect(missing.statusCode, missing.body).toBe(404);
    // 41 reads: the first ones alone, the rest together while those are out.
    expect(statements).toBeGreaterThan(0);
    expect(statements).toBeLessThan(16);
  });

  it("gathers reads of a product's stock (keyed by the product's id) the same way, each its own, a missing one its 404", async () => {
    const api = asAdmin(app);
    const products = await Promise.all(Array.from({ length: 6 }, (_, i) => createProduct(app, {}, i + 1)));
    const asked = products.flatMap((product) => Array.from({ length: 5 }, () => product.id));
    const before = front!.binds();
    const [answers, missing] = await Promise.all([
      Promise.all(asked.map((id) => api({ method: 'GET', url: `/api/stock/${id}` }))),
      api({ method: 'GET', url: '/api/stock/999999999' }),
    ]);
    const statements = front!.binds() - before;
    answers.forEach((answer, i) => {
      expect(answer.statusCode, answer.body).toBe(200);
      const product = products.findIndex((p) => p.id === asked[i]);
      expect(answer.json()).toMatchObject({ productId: asked[i], available: product + 1, reserved: 0 });
    });
    expect(missing.statusCode, missing.body).toBe(404);
    expect(statements).toBeGreaterThan(0);
    expect(statements).toBeLessThan(12);
  });

  it('gathers the reads of sampled requests too (each on its own traced handle), each its own row', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => createUser(app)));
    const asked = users.flatMap((user) => Array.from({ length: 5 }, () => user.id));
    // What a sampled request's request.db is: the database with its span (tracing/db-spans.ts).
    const handles = asked.map(() =>
      tracedDb(app.db, trace.wrapSpanContext({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 })),
    );
    const before = front!.binds();
    const rows = await Promise.all(asked.map((id, i) => findUserById(handles[i]!, id)));
    const statements = front!.binds() - before;

    expect(rows.map((row) => row?.id)).toEqual(asked);
    expect(statements).toBeGreaterThan(0);
    expect(statements).toBeLessThan(16);
  });

  it('sends a read that comes alone as one statement of its own', async () => {
    const user = await aCustomer(app, 'users:read');
    for (let i = 0; i < 3; i++) {
      const before = front!.binds();
      const answer = await read(user.id, user.auth);
      expect(answer.statusCode, answer.body).toBe(200);
      expect(front!.binds() - before).toBe(1);
    }
  });

  it('answers a read right after a write with the written row, while other reads are gathered', async () => {
    const api = asAdmin(app);
    const others = await Promise.all(Array.from({ length: 6 }, () => createUser(app)));
    const user = await createUser(app);
    const noise = () => Promise.all(others.map((other) => api({ method: 'GET', url: `/api/v1/users/${other.id}` })));
    for (let round = 0; round < 5; round++) {
      const name = `Renamed ${round}`;
      const [, patched] = await Promise.all([
        noise(),
        api({
          method: 'PATCH',
          url: `/api/v1/users/${user.id}`,
          payload: { name },
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
      ]);
      expect(patched.statusCode, patched.body).toBe(200);
      const [, again] = await Promise.all([noise(), api({ method: 'GET', url: `/api/v1/users/${user.id}` })]);
      expect(again.statusCode, again.body).toBe(200);
      expect(again.json()).toMatchObject({ id: user.id, name });
      expect(again.headers.etag).toBe(patched.headers.etag);
    }
  });
});

describe.runIf(direct)('a gathered statement that fails', async () => {
  // A skipped suite's body still runs at collection (on PGlite, behind a pooler): nothing built then.
  if (!direct) return;
  const { app } = await buildTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: '300' });

  it('fails only the reads it carried: the reads gathered behind it are answered, each its own row or its 404', async () => {
    const api = asAdmin(app);
    const users = await Promise.all(Array.from({ length: 6 }, () => createUser(app)));
    // Every read of users waits while another session holds the table, until statement_timeout.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = app.db.transaction().execute(async (trx) => {
      await sql`lock table users in access exclusive mode`.execute(trx);
      locked();
      await gate;
    });
    await isLocked;
    try {
      // The first read goes alone and waits on the lock; the others come while it is out, and gather.
      const first = api({ method: 'GET', url: `/api/v1/users/${users[0]!.id}` });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const asked = [...users.slice(1).map((user) => user.id), 999_999_999];
      const gathered = Promise.all(asked.map((id) => api({ method: 'GET', url: `/api/v1/users/${id}` })));
      const failed = await first;
      expect(failed.statusCode, failed.body).toBe(503);
      expect(failed.headers['retry-after']).toBeDefined();
      // The lone statement was cancelled; the gathered one, sent when it came back, now finds the table free.
      open();
      const answers = await gathered;
      answers.slice(0, -1).forEach((answer, i) => {
        expect(answer.statusCode, answer.body).toBe(200);
        expect(answer.json<{ id: number }>().id).toBe(asked[i]);
      });
      expect(answers.at(-1)!.statusCode).toBe(404);
    } finally {
      open();
      await holder;
    }
  });
});
