// Primary-key reads on a direct connection (src/db/prepared.ts, prepareById; docs/architecture.md,
// "Reads gathered"): a read that finds none of its kind out goes at once, alone; reads that come
// while some are out go together, as one statement, each caller with its own row or its 404; a
// statement that fails fails only the reads it carried, and a read waits for its statement at
// most DATABASE_QUEUE_TIMEOUT_MS. Proved through the API on the suite's PostgreSQL, the app's
// connections through a front on loopback that counts the statements they execute (the
// protocol's Bind messages). What holds a statement out, for as long as a test needs, is a lock
// on its table taken by a session of the test's own.
import { get } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { trace } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, createUser } from '../support/factories.js';
import { buildTestApp, engine, testPostgres } from '../support/test-app.js';
import { listening, upstreamFor } from '../support/tcp-front.js';
import { ADMIN } from '../support/tokens.js';
import { until } from '../support/until.js';
import { waitingReads } from '../../src/db/prepared-by-id.js';
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

/** Resolves once a session waits for a lock on a table named `table` (any schema). */
async function waitingOnLock(table: string): Promise<void> {
  const observer = postgres(testPostgres.directUrl!, { max: 1, onnotice: () => {} });
  try {
    await until(
      `a statement waiting for a lock on ${table}`,
      async () =>
        (
          await observer<
            { n: number }[]
          >`select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation
             where not l.granted and c.relname = ${table}`
        )[0]!.n > 0,
      5000,
    );
  } finally {
    await observer.end();
  }
}

/**
 * Runs `work` while a session of the test's own (not the app's, not through the front) holds
 * `table` of `app`'s schema in access exclusive mode, until `work` calls its `release`.
 */
async function holding(app: FastifyInstance, table: string, work: (release: () => void) => Promise<void>) {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(app.db);
  const holder = postgres(testPostgres.directUrl!, { max: 1, onnotice: () => {} });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const held = holder.begin(async (tx) => {
    await tx.unsafe(`lock table "${rows[0]!.schema}".${table} in access exclusive mode`);
    locked();
    await gate;
  });
  await isLocked;
  try {
    await work(release);
  } finally {
    release();
    await held;
    await holder.end();
  }
}

/**
 * Sends `first` (it goes alone, and waits on the lock `holding` took), then, once its statement
 * waits, `rest`; releases the lock once all of `rest` wait for a gathered statement. The
 * statements executed meanwhile, and every answer.
 */
async function heldThenGathered<T>(
  app: FastifyInstance,
  table: string,
  first: () => Promise<T>,
  rest: (() => Promise<T>)[],
): Promise<{ statements: number; first: T; rest: T[] }> {
  let result!: { statements: number; first: T; rest: T[] };
  await holding(app, table, async (release) => {
    const before = front!.binds();
    const alone = first();
    await waitingOnLock(table);
    const gathered = Promise.all(rest.map((read) => read()));
    await until('every later read waiting for its gathered statement', () => waitingReads(app.db) === rest.length);
    release();
    const [firstAnswer, restAnswers] = await Promise.all([alone, gathered]);
    result = { statements: front!.binds() - before, first: firstAnswer, rest: restAnswers };
  });
  return result;
}

const front = direct ? await bindCountingFront() : undefined;
// Reads held out by a lock wait longer than the default queue time-out: 10 s here.
const built =
  front === undefined ? undefined : await buildTestApp({ DATABASE_URL: front.url, DATABASE_QUEUE_TIMEOUT_MS: '10000' });

describe.runIf(built !== undefined)('primary-key reads on a direct connection', () => {
  // A skipped suite's body still runs at collection (on PGlite, behind a pooler): nothing built then.
  const app = built?.app as FastifyInstance;
  const read = (id: number, auth: string) =>
    app.inject({ method: 'GET', url: `/api/v1/users/${id}`, headers: { authorization: auth } });

  it('answers the reads that come while one is out in one statement, each caller its own row, a missing one its 404', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => aCustomer(app, 'users:read')));
    const asked = users.flatMap((user) => Array.from({ length: 5 }, () => user));
    const { statements, first, rest } = await heldThenGathered(app, 'users', () => read(users[0]!.id, users[0]!.auth), [
      ...asked.map((user) => () => read(user.id, user.auth)),
      () => read(999_999_999, ADMIN),
    ]);
    expect(first.statusCode, first.body).toBe(200);
    rest.slice(0, -1).forEach((answer, i) => {
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json<{ id: number }>().id).toBe(asked[i]!.id);
    });
    expect(rest.at(-1)!.statusCode).toBe(404);
    // 42 reads: the first alone, the 41 that came while it was out together.
    expect(statements).toBe(2);
  });

  it("gathers reads of a product's stock (keyed by the product's id) the same way, each its own, a missing one its 404", async () => {
    const api = asAdmin(app);
    const products = await Promise.all(Array.from({ length: 6 }, (_, i) => createProduct(app, {}, i + 1)));
    const asked = products.flatMap((product) => Array.from({ length: 5 }, () => product.id));
    const { statements, first, rest } = await heldThenGathered(
      app,
      'stock',
      () => api({ method: 'GET', url: `/api/stock/${products[0]!.id}` }),
      [
        ...asked.map((id) => () => api({ method: 'GET', url: `/api/stock/${id}` })),
        () => api({ method: 'GET', url: '/api/stock/999999999' }),
      ],
    );
    expect(first.statusCode, first.body).toBe(200);
    rest.slice(0, -1).forEach((answer, i) => {
      expect(answer.statusCode, answer.body).toBe(200);
      const product = products.findIndex((p) => p.id === asked[i]);
      expect(answer.json()).toMatchObject({ productId: asked[i], available: product + 1, reserved: 0 });
    });
    expect(rest.at(-1)!.statusCode).toBe(404);
    expect(statements).toBe(2);
  });

  it('gathers the reads of sampled requests too (each on its own traced handle), each its own row', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => createUser(app)));
    const asked = users.flatMap((user) => Array.from({ length: 5 }, () => user.id));
    // What a sampled request's request.db is: the database with its span (tracing/db-spans.ts).
    const handle = () =>
      tracedDb(app.db, trace.wrapSpanContext({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 }));
    const { statements, first, rest } = await heldThenGathered(
      app,
      'users',
      () => findUserById(handle(), users[0]!.id),
      asked.map((id) => () => findUserById(handle(), id)),
    );

    expect(first?.id).toBe(users[0]!.id);
    expect(rest.map((row) => row?.id)).toEqual(asked);
    expect(statements).toBe(2);
  });

  it('sends no statement for reads whose clients hung up while they waited', async () => {
    const users = await Promise.all(Array.from({ length: 3 }, () => aCustomer(app, 'users:read')));
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const connections = () =>
      new Promise<number>((resolve) => app.server.getConnections((_error, count) => resolve(count)));
    await holding(app, 'users', async (release) => {
      const before = front!.binds();
      const first = read(users[0]!.id, users[0]!.auth);
      await waitingOnLock('users');
      const left = users
        .slice(1)
        .map((user) =>
          get(`${address}/api/v1/users/${user.id}`, { headers: { authorization: user.auth } }).on('error', () => {}),
        );
      await until('the reads waiting for their gathered statement', () => waitingReads(app.db) === left.length);
      for (const request of left) request.destroy();
      await until('their connections closed', async () => (await connections()) === 0);
      release();
      expect((await first).statusCode).toBe(200);
      await until('no read waiting', () => waitingReads(app.db) === 0);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(front!.binds() - before).toBe(1);
    });
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
  // The first read fails at its statement time-out; the reads behind it wait longer than that.
  const { app } = await buildTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: '2000', DATABASE_QUEUE_TIMEOUT_MS: '10000' });

  it('fails only the reads it carried: the reads gathered behind it are answered, each its own row or its 404', async () => {
    const api = asAdmin(app);
    const users = await Promise.all(Array.from({ length: 6 }, () => createUser(app)));
    await holding(app, 'users', async (release) => {
      // The first read goes alone and waits on the lock; the others come while it is out, and gather.
      const first = api({ method: 'GET', url: `/api/v1/users/${users[0]!.id}` });
      await waitingOnLock('users');
      const asked = [...users.slice(1).map((user) => user.id), 999_999_999];
      const gathered = Promise.all(asked.map((id) => api({ method: 'GET', url: `/api/v1/users/${id}` })));
      await until('the later reads waiting for their gathered statement', () => waitingReads(app.db) === asked.length);
      const failed = await first;
      expect(failed.statusCode, failed.body).toBe(503);
      expect(failed.headers['retry-after']).toMatch(/^\d+$/);
      // The lone statement was cancelled; the gathered one, sent when it came back, finds the table free.
      release();
      const answers = await gathered;
      answers.slice(0, -1).forEach((answer, i) => {
        expect(answer.statusCode, answer.body).toBe(200);
        expect(answer.json<{ id: number }>().id).toBe(asked[i]);
      });
      expect(answers.at(-1)!.statusCode).toBe(404);
    });
  });
});

// docs/operations.md#overload: queue time, not queue length. A read that waits for its gathered
// statement waits at most DATABASE_QUEUE_TIMEOUT_MS, whatever holds the statement out.
describe.runIf(direct)('a gathered read held by a lock', async () => {
  if (!direct) return;
  const { app } = await buildTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: '5000', DATABASE_QUEUE_TIMEOUT_MS: '500' });

  it('does not hold the later reads of its kind past the queue time-out: they are answered 503 then', async () => {
    const users = await Promise.all(Array.from({ length: 3 }, () => aCustomer(app, 'users:read')));
    const read = (user: { id: number; auth: string }) =>
      app.inject({ method: 'GET', url: `/api/v1/users/${user.id}`, headers: { authorization: user.auth } });
    await holding(app, 'users', async (release) => {
      const first = read(users[0]!);
      await waitingOnLock('users');
      const started = performance.now();
      const later = await Promise.all(
        users.slice(1).map((user) => read(user).then((answer) => ({ answer, ms: performance.now() - started }))),
      );
      for (const { answer, ms } of later) {
        expect(answer.statusCode, answer.body).toBe(503);
        expect(answer.headers['retry-after']).toMatch(/^\d+$/);
        expect(ms).toBeLessThan(1500);
      }
      release();
      expect((await first).statusCode).toBe(200);
      expect((await read(users[1]!)).statusCode).toBe(200);
    });
  });
});
