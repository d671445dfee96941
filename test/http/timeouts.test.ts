// docs/api-guide.md#limits-and-time-outs time-outs: a request still running after REQUEST_TIMEOUT_MS is 503 with Retry-After;
// on PostgreSQL a statement cancelled by statement_timeout is 503 too, and a transaction left
// idle is ended by PostgreSQL itself. A held row lock (or, on the embedded engine, a held
// session) makes a real route slow: no test-only route, no sleep in the service.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { asAdmin, createUser } from '../support/factories.js';
import { buildTestApp, engine } from '../support/test-app.js';

/** Holds user `id`'s row (and on PGlite the whole session) until the returned release is called. */
async function holdUser(
  db: Awaited<ReturnType<typeof buildTestApp>>['app']['db'],
  id: number,
): Promise<{ release: () => Promise<void> }> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const done = db.transaction().execute(async (trx) => {
    await sql`select id from users where id = ${id} for update`.execute(trx);
    locked();
    await gate;
  });
  await isLocked;
  return {
    release: async () => {
      open();
      await done;
    },
  };
}

/**
 * A user row written straight to the database: creating one through the API hashes its password
 * (argon2, ~100 ms of a thread-pool thread), which a loaded host can stretch past this file's
 * 300-ms REQUEST_TIMEOUT_MS before the test has begun.
 */
async function storedUser(app: Awaited<ReturnType<typeof buildTestApp>>['app']): Promise<{ id: number; name: string }> {
  const name = 'Timed User';
  const email = `timed-${String(process.pid)}-${String(performance.now()).replace('.', '-')}@example.com`;
  const { rows } = await sql<{ id: number }>`
    insert into users (name, email, password_hash) values (${name}, ${email}, 'not a hash') returning id`.execute(
    app.db,
  );
  return { id: rows[0]!.id, name };
}

const problem503 = {
  type: 'about:blank',
  title: 'Service Unavailable',
  status: 503,
  detail: 'The request took too long and was stopped. Retry later.',
};

describe('REQUEST_TIMEOUT_MS', async () => {
  const { app, logs } = await buildTestApp({ REQUEST_TIMEOUT_MS: '300' });
  const api = asAdmin(app);

  it('answers a request still running after the limit with 503 and Retry-After', async () => {
    const user = await storedUser(app);
    const hold = await holdUser(app.db, user.id);
    const started = Date.now();
    const response = await api({ method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'Slow Change' } });
    const waited = Date.now() - started;
    await hold.release();

    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.json()).toEqual({ ...problem503, instance: `/api/v1/users/${user.id}` });
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(logs.some((l) => l.msg === 'request timed out')).toBe(true);
  });

  it('times out every slow request among fast ones that finish before, between and after them', async () => {
    const user = await storedUser(app);
    const hold = await holdUser(app.db, user.id);
    const probe = () => app.inject({ method: 'GET', url: '/api/public/health/live' });
    const slow = () => api({ method: 'PATCH', url: `/api/v1/users/${user.id}`, payload: { name: 'Slow Change' } });
    // In flight together: each fast answer leaves the list of requests in flight from its
    // oldest, middle or newest place while the slow ones wait in it.
    const answers = await Promise.all([probe(), slow(), probe(), probe(), slow(), probe(), slow(), probe()]);
    await hold.release();

    expect(answers.map((r) => r.statusCode)).toEqual([200, 503, 200, 200, 503, 200, 503, 200]);
    expect((await probe()).statusCode).toBe(200);
  });

  it('serves normally afterwards, and a fast request is never cut', async () => {
    const user = await storedUser(app);
    const response = await api({ method: 'GET', url: `/api/v1/users/${user.id}` });
    expect(response.statusCode).toBe(200);
  });
});

describe.runIf(engine === 'postgres')('PostgreSQL time-outs', async () => {
  if (engine !== 'postgres') return; // a skipped suite's body still runs at collection
  const { app } = await buildTestApp({
    DATABASE_STATEMENT_TIMEOUT_MS: '300',
    DATABASE_IDLE_TRANSACTION_TIMEOUT_MS: '1500',
  });
  const api = asAdmin(app);

  it('answers a statement cancelled by statement_timeout with 503 and Retry-After', async () => {
    const user = await createUser(app);
    const hold = await holdUser(app.db, user.id);
    const response = await api({
      method: 'PATCH',
      url: `/api/v1/users/${user.id}`,
      payload: { name: 'Blocked Change' },
    });
    await hold.release();

    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toEqual({ ...problem503, instance: `/api/v1/users/${user.id}` });
    // The change did not happen, and the row is free again.
    const after = await api({ method: 'GET', url: `/api/v1/users/${user.id}` });
    expect(after.json().name).toBe(user.name);
  });

  it('lets PostgreSQL end a transaction left idle, and keeps serving', async () => {
    const abandoned = app.db.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      await new Promise((r) => setTimeout(r, 2000));
      await sql`select 1`.execute(trx);
    });
    // The session is gone: the transaction fails (never hangs), and its connection is not
    // handed out again as if it were open.
    await expect(abandoned).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        app.db
          .transaction()
          .execute(async (trx) => (await sql<{ n: number }>`select ${i}::int as n`.execute(trx)).rows[0]!.n),
      ),
    );
    expect(results).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);

    const user = await createUser(app);
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).statusCode).toBe(200);
  });

  it('fails a COMMIT whose session PostgreSQL ended with the cause, not a second error', async () => {
    // Kysely rolls back after a failed COMMIT; that rollback must not hide why the COMMIT failed.
    const committed = app.db.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      await new Promise((r) => setTimeout(r, 2000));
    });
    await expect(committed).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
    const user = await createUser(app);
    expect((await api({ method: 'GET', url: `/api/v1/users/${user.id}` })).statusCode).toBe(200);
  });

  it('sets both limits on every session', async () => {
    const { rows } = await sql<{
      st: string;
      it: string;
    }>`select current_setting('statement_timeout') as st, current_setting('idle_in_transaction_session_timeout') as it`.execute(
      app.db,
    );
    expect(rows[0]).toEqual({ st: '300ms', it: '1500ms' });
  });
});
