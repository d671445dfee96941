// Behind a pooler in transaction mode, each hot statement goes out as a call of a PL/pgSQL
// function made for it (src/db/statement-functions.ts), whose plans every server connection
// caches, instead of as text parsed and planned on every run. Proved through the API: the
// function appears once the statement has run, the service calls it (a body changed under it
// changes the answer), a function dropped under the running service costs no request, and
// orders, keyed or not, are placed through theirs. Run with DATABASE_POOLER=transaction on the
// suite's PostgreSQL: directly, and through PgBouncer in .ci/run's pooler pass.
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresPool } from '../../src/db/postgres-pool.js';
import { FUNCTION_PREFIX } from '../../src/db/statement-functions.js';
import { aCustomer, createProduct, placeOrder, stockOf } from '../support/factories.js';
import { buildTestApp, engine, testPostgres } from '../support/test-app.js';

const built = engine === 'postgres' ? await buildTestApp({ DATABASE_POOLER: 'transaction' }) : undefined;

describe.skipIf(built === undefined)('hot statements as functions, behind a transaction pooler', () => {
  // Undefined on PGlite, where this part is skipped (its body still runs).
  const app = built?.app as FastifyInstance;
  const db = built?.app.db as FastifyInstance['db'];

  /** The statement functions of the app's schema: name and body. */
  const functions = async () =>
    (
      await sql<{ name: string; body: string }>`
        select proname as name, prosrc as body from pg_proc
        where proname like ${`${FUNCTION_PREFIX}%`} and pronamespace = current_schema()::regnamespace`.execute(db)
    ).rows;

  /** The function whose body holds `fragment`, once it is made (made in the background). */
  async function functionWith(fragment: string): Promise<{ name: string; body: string }> {
    for (let i = 0; i < 100; i++) {
      const found = (await functions()).find((f) => f.body.includes(fragment));
      if (found !== undefined) return found;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no statement function holds ${fragment}`);
  }

  const V1_MANY =
    'select "id", "name", "email", "version", "created_at" from "users" where "id" = any(string_to_array($1, \',\')::bigint[])';

  it('makes a function for a read once it has run, and sends the read as a call of it', async () => {
    // Primary-key reads go out gathered (several ids in one statement), so it is that statement's.
    const user = await aCustomer(app);
    const first = await app.inject({
      method: 'GET',
      url: `/api/v1/users/${user.id}`,
      headers: { authorization: user.auth },
    });
    expect(first.statusCode, first.body).toBe(200);
    const made = await functionWith(V1_MANY);

    // Its body changed under the service: the next read answers what the function returns.
    const { rows } = await sql<{ definition: string }>`
      select pg_get_functiondef(oid) as definition from pg_proc
      where proname = ${made.name} and pronamespace = current_schema()::regnamespace`.execute(db);
    const definition = rows[0]!.definition.replace(
      /return query (.*);\s*end/s,
      `return query select q.id, 'from the function'::text, q.email, q.version, q.created_at from ($1) q;\nend`,
    );
    expect(definition).toContain('from the function');
    await sql.raw(definition).execute(db);
    const changed = await app.inject({
      method: 'GET',
      url: `/api/v1/users/${user.id}`,
      headers: { authorization: user.auth },
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json<{ name: string }>().name).toBe('from the function');
    // The same read without the function: the row's own name (the control of the change above).
    const own = await sql<{ name: string }>`select name from users where id = ${user.id}`.execute(db);
    expect(own.rows[0]!.name).not.toBe('from the function');

    // Dropped under the running service: the read still answers, as text, and the function is made again.
    await sql.raw(`drop function ${made.name}`).execute(db);
    const after = await app.inject({
      method: 'GET',
      url: `/api/v1/users/${user.id}`,
      headers: { authorization: user.auth },
    });
    expect(after.statusCode, after.body).toBe(200);
    expect(after.json<{ name: string }>().name).toBe(own.rows[0]!.name);
    // The next run of the statement makes it again.
    const next = await app.inject({
      method: 'GET',
      url: `/api/v1/users/${user.id}`,
      headers: { authorization: user.auth },
    });
    expect(next.json<{ name: string }>().name).toBe(own.rows[0]!.name);
    const again = await functionWith(V1_MANY);
    expect(again.name).toBe(made.name);
    expect(again.body).not.toContain('from the function');
  });

  it('gathers the reads of one moment into one statement, each caller with its own row', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => aCustomer(app, 'users:read')));
    const read = (id: number, auth: string) =>
      app.inject({ method: 'GET', url: `/api/v1/users/${id}`, headers: { authorization: auth } });
    const warm = await read(users[0]!.id, users[0]!.auth);
    expect(warm.statusCode, warm.body).toBe(200);
    const made = await functionWith(V1_MANY);
    // Each call of the statement that reads several ids writes how many it was asked for.
    await sql`create table gathered_calls (ids int not null)`.execute(db);
    const { rows } = await sql<{ definition: string }>`
      select pg_get_functiondef(oid) as definition from pg_proc
      where proname = ${made.name} and pronamespace = current_schema()::regnamespace`.execute(db);
    const counting = rows[0]!.definition.replace(
      /\bbegin\n/,
      "begin\ninsert into gathered_calls values (cardinality(string_to_array($1, ',')));\n",
    );
    expect(counting).toContain('gathered_calls');
    await sql.raw(counting).execute(db);

    // Forty reads at once: each user five times, each with their own token; and a user that is not.
    const asked = users.flatMap((user) => Array.from({ length: 5 }, () => user));
    const [answers, missing] = await Promise.all([
      Promise.all(asked.map((user) => read(user.id, user.auth))),
      read(999_999_999, users[0]!.auth),
    ]);
    answers.forEach((answer, i) => {
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json<{ id: number }>().id).toBe(asked[i]!.id);
    });
    expect(missing.statusCode, missing.body).toBe(404);
    const calls = (await sql<{ ids: number }>`select ids from gathered_calls`.execute(db)).rows.map((r) => r.ids);
    // Every read went through it, in fewer statements than reads.
    expect(calls.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect(calls.length).toBeLessThan(asked.length + 1);
    expect(Math.max(...calls)).toBeGreaterThan(1);
  });

  it('places orders through the order statement’s function, keyed ones inside their transaction too', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const first = await placeOrder(app, customer.auth, product.id, 2);
    expect(first.statusCode, first.body).toBe(201);
    await functionWith('insert into orders');

    const second = await placeOrder(app, customer.auth, product.id, 3);
    expect(second.statusCode, second.body).toBe(201);
    const keyedOrder = () =>
      app.inject({
        method: 'POST',
        url: '/api/v1/orders',
        headers: { authorization: customer.auth, 'idempotency-key': 'statement-functions-1' },
        payload: { productId: product.id, quantity: 4 },
      });
    const keyed = await keyedOrder();
    expect(keyed.statusCode, keyed.body).toBe(201);
    const replay = await keyedOrder();
    expect(replay.statusCode).toBe(201);
    expect(replay.json<{ id: number }>().id).toBe(keyed.json<{ id: number }>().id);
    // Not enough left for another 4: refused, and nothing reserved.
    const refused = await placeOrder(app, customer.auth, product.id, 4);
    expect(refused.statusCode, refused.body).toBe(422);

    expect(await stockOf(app, product.id)).toEqual({ available: 1, reserved: 9 });
    for (const placed of [first, second, keyed]) {
      const read = await app.inject({
        method: 'GET',
        url: `/api/v1/orders/${placed.json<{ id: number }>().id}`,
        headers: { authorization: customer.auth },
      });
      expect(read.statusCode, read.body).toBe(200);
      expect(read.json()).toEqual(placed.json());
    }
  });
});

// The pool itself: what becomes a function and what stays text.
describe.skipIf(engine !== 'postgres')('the pool’s statement functions', () => {
  // A skipped suite's body still runs at collection: on the embedded engine there may be no URL.
  if (engine !== 'postgres') return;
  const schema = `test_statement_functions_${process.pid}`;
  const admin = postgres(testPostgres.directUrl!, { max: 1, onnotice: () => {} });
  const pool = new PostgresPool(
    testPostgres.directUrl!,
    1,
    { prepare: false, onnotice: () => {}, connection: { search_path: schema } },
    { inline: true },
  );
  afterAll(async () => {
    await pool.end();
    await admin.unsafe(`drop schema if exists ${schema} cascade`);
    await admin.end();
  });

  const settled = async () => {
    for (let i = 0; i < 100 && pool.statementFunctions().calls + pool.statementFunctions().texts === 0; i++)
      await new Promise((r) => setTimeout(r, 20));
    // A moment more for the one being made.
    await new Promise((r) => setTimeout(r, 200));
  };

  it('makes one for a statement with a result, and answers the same rows through it', async () => {
    await admin.unsafe(`create schema ${schema}`);
    const text = `select $1::int + 1 as "next", $2::text || '''s' as "word"`;
    const before = await pool.query(text, [41, "it's"]);
    pool.hot(text);
    await settled();
    expect(pool.statementFunctions()).toEqual({ calls: 1, texts: 0 });
    const through = await pool.query(text, [41, "it's"]);
    expect([...through]).toEqual([...before]);
    expect([...through]).toEqual([{ next: 42, word: "it's's" }]);
  });

  it('refuses a value with a NUL before sending anything, through the function too, and counts nothing in flight', async () => {
    const text = `select $1::int + 1 as "next", $2::text || '''s' as "word"`;
    await expect(pool.query(text, [1, 'a\u0000b'])).rejects.toMatchObject({ code: '22021' });
    await expect(pool.query('select $1::text as "t"', ['a\u0000b'])).rejects.toMatchObject({ code: '22021' });
    expect(pool.connections().map((c) => c.inflight)).toEqual([0]);
    expect([...(await pool.query(text, [1, 'b']))]).toEqual([{ next: 2, word: "b's" }]);
  });

  it('leaves as text a statement whose result a function cannot declare (a column name twice)', async () => {
    const text = 'select $1::int as "a", $1::int as "a"';
    pool.hot(text);
    await settled();
    expect(pool.statementFunctions()).toEqual({ calls: 1, texts: 1 });
    const rows = await pool.query(text, [7]);
    expect(rows).toHaveLength(1);
  });

  it('calls its functions by their schema, and never one of the expected name whose body is not its own', async () => {
    const text = `select $1::int * 2 as "twice"`;
    pool.hot(text);
    await settled();
    await new Promise((r) => setTimeout(r, 300));
    const [made] = await admin.unsafe<{ name: string; definition: string }[]>(
      `select proname as name, pg_get_functiondef(p.oid) as definition from pg_proc p
        join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = '${schema}' and prosrc like '%* 2 as "twice"%'`,
    );
    expect(made).toBeDefined();
    expect([...(await pool.query(text, [4]))]).toEqual([{ twice: 8 }]);
    // Another body under that name (as a role with CREATE on the schema could leave there).
    await admin.unsafe(made!.definition.replace(/return query (.*);\s*end/s, 'return query select 666;\nend'));
    const another = new PostgresPool(
      testPostgres.directUrl!,
      1,
      { prepare: false, onnotice: () => {}, connection: { search_path: `public, ${schema}` } },
      { inline: true },
    );
    try {
      // Its schema is public here: its function is made there, and called there by its name.
      another.hot(text);
      for (let i = 0; i < 100 && another.statementFunctions().calls + another.statementFunctions().texts === 0; i++)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
      expect([...(await another.query(text, [5]))]).toEqual([{ twice: 10 }]);
    } finally {
      await another.end();
      await admin.unsafe(`drop function if exists public.${made!.name}`);
    }
    // A pool of the first schema again: the function there is not its own, so it stays text.
    const third = new PostgresPool(
      testPostgres.directUrl!,
      1,
      { prepare: false, onnotice: () => {}, connection: { search_path: schema } },
      { inline: true },
    );
    try {
      third.hot(text);
      for (let i = 0; i < 100 && third.statementFunctions().calls + third.statementFunctions().texts === 0; i++)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
      expect(third.statementFunctions()).toEqual({ calls: 0, texts: 1 });
      expect([...(await third.query(text, [6]))]).toEqual([{ twice: 12 }]);
    } finally {
      await third.end();
    }
  });
});
