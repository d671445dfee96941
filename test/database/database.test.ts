// The data layer under concurrency: PGlite is one session, so our dialect must serialize it
// without letting one request's statement land inside another's transaction. The same test
// runs on PostgreSQL, where transactions reserve a connection of the pool.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { aUserRequest, asAdmin } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const { db } = app;

describe('database access under concurrency', () => {
  it('keeps parallel read-modify-write transactions isolated and complete', async () => {
    await sql`create table counters (id int primary key, value int not null)`.execute(db);
    await sql`insert into counters values (1, 0)`.execute(db);

    await Promise.all(
      Array.from({ length: 40 }, () =>
        db.transaction().execute(async (trx) => {
          const { rows } = await sql<{ value: number }>`select value from counters where id = 1 for update`.execute(
            trx,
          );
          await new Promise((r) => setTimeout(r, 1));
          await sql`update counters set value = ${rows[0]!.value + 1} where id = 1`.execute(trx);
        }),
      ),
    );

    const { rows } = await sql<{ value: number }>`select value from counters where id = 1`.execute(db);
    expect(rows[0]!.value).toBe(40);
  });

  it('rolls a failed transaction back without touching concurrent work', async () => {
    await sql`create table notes (id int primary key)`.execute(db);

    const results = await Promise.allSettled([
      db.transaction().execute(async (trx) => {
        await sql`insert into notes values (1)`.execute(trx);
        await new Promise((r) => setTimeout(r, 5));
        throw new Error('abort');
      }),
      sql`insert into notes values (2)`.execute(db),
      db.transaction().execute(async (trx) => {
        await sql`insert into notes values (3)`.execute(trx);
      }),
    ]);

    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    const { rows } = await sql<{ id: number }>`select id from notes order by id`.execute(db);
    expect(rows.map((r) => r.id)).toEqual([2, 3]);
  });

  it('serves many parallel HTTP requests that mix reads and writes', async () => {
    const creates = Array.from({ length: 20 }, () =>
      api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() }),
    );
    const reads = Array.from({ length: 20 }, () => api({ method: 'GET', url: '/api/v1/users?size=5' }));

    const responses = await Promise.all([...creates, ...reads]);

    expect(responses.slice(0, 20).every((r) => r.statusCode === 201)).toBe(true);
    expect(responses.slice(20).every((r) => r.statusCode === 200)).toBe(true);
    const ids = new Set(responses.slice(0, 20).map((r) => r.json().id));
    expect(ids.size).toBe(20);
  });

  it('enforces integrity in the schema, not only in the validators', async () => {
    const blankName = sql`insert into users (name, email, password_hash) values ('  ', 'a@b.c', 'h')`.execute(db);
    const duplicate = (async () => {
      await sql`insert into users (name, email, password_hash) values ('Ab', 'Same@Example.com', 'h')`.execute(db);
      await sql`insert into users (name, email, password_hash) values ('Cd', 'same@example.COM', 'h')`.execute(db);
    })();

    await expect(blankName).rejects.toMatchObject({ code: '23514' });
    await expect(duplicate).rejects.toMatchObject({ code: '23505' });
  });
});
