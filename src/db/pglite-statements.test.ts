import { PGlite } from '@electric-sql/pglite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PGliteStatements } from './pglite-statements.js';

let pglite: PGlite;

beforeEach(async () => {
  pglite = await PGlite.create();
  await pglite.exec(`
    create table t (
      id bigserial primary key, name text not null unique, price numeric(12, 2), n int, ok boolean,
      at timestamptz, local timestamp, doc jsonb, tags text[], ids bigint[], raw bytea
    )`);
});
afterEach(async () => {
  await pglite.close();
});

/** The texts of the named statements PostgreSQL holds for this session, sorted. */
async function held(): Promise<string[]> {
  const { rows } = await pglite.query<{ statement: string }>(
    'select statement from pg_prepared_statements order by statement',
  );
  return rows.map((r) => r.statement);
}

describe('PGliteStatements', () => {
  it('answers exactly as query() does: rows, types both ways, nulls and affected rows', async () => {
    const statements = new PGliteStatements(pglite);
    const insert =
      'insert into t (name, price, n, ok, at, local, doc, tags, ids, raw) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning *';
    const values = [
      'a "quoted", name',
      12.5,
      -3,
      true,
      new Date('2026-11-24T22:34:23.123Z'),
      new Date('2026-11-24T22:34:23.123Z'),
      { k: [1, 'two', null] },
      ['x', 'y,z', null],
      [1, 2],
      new Uint8Array([0, 255, 7]),
    ];
    const viaQuery = await pglite.query(insert, values);
    const viaStatement = await statements.query(insert, ['other', ...values.slice(1)]);
    expect(viaStatement.rows).toEqual([{ ...(viaQuery.rows[0] as object), id: 2, name: 'other' }]);
    expect(viaStatement.affectedRows).toBe(viaQuery.affectedRows);

    const nulls = 'insert into t (name, price, doc) values ($1, $2, $3) returning price, doc, at';
    expect((await statements.query(nulls, ['nulls', null, undefined])).rows).toEqual(
      (await pglite.query(nulls, ['nulls2', null, undefined])).rows,
    );

    const select = 'select id, name, price from t where id > $1 order by id';
    expect(await statements.query(select, [0])).toEqual({
      rows: (await pglite.query(select, [0])).rows,
      affectedRows: 0,
    });
    const update = 'update t set n = n + 1 where id <= $1';
    expect((await statements.query(update, [2])).affectedRows).toBe(2);
    expect((await statements.query('delete from t where id > $1', [0])).affectedRows).toBe(4);
  });

  it('parses a statement once and binds it again on every later call', async () => {
    const statements = new PGliteStatements(pglite);
    const select = 'select count(*)::int as n from t where id > $1';
    for (const id of [0, 1, 2]) expect((await statements.query(select, [id])).rows).toEqual([{ n: 0 }]);
    expect(await held()).toEqual([select]);
  });

  it('names its statements apart from another instance’s on the same database', async () => {
    const first = new PGliteStatements(pglite);
    const second = new PGliteStatements(pglite);
    expect((await first.query('select 1 as a', [])).rows).toEqual([{ a: 1 }]);
    expect((await second.query('select 2 as b', [])).rows).toEqual([{ b: 2 }]);
    expect(await held()).toEqual(['select 1 as a', 'select 2 as b']);
  });

  it('closes the least recently used statement beyond its limit', async () => {
    const statements = new PGliteStatements(pglite, 2);
    await statements.query('select 1 as a', []);
    await statements.query('select 2 as b', []);
    await statements.query('select 1 as a', []); // used again: the second is now the oldest
    await statements.query('select 3 as c', []);
    await statements.query('select 1 as a', []); // the Close goes out with this exchange
    expect(await held()).toEqual(['select 1 as a', 'select 3 as c']);
  });

  it('parses a statement again when its table changed columns', async () => {
    const statements = new PGliteStatements(pglite);
    await statements.query("insert into t (name) values ('a')", []);
    expect(Object.keys((await statements.query('select * from t', [])).rows[0] as object)).not.toContain('extra');
    await pglite.exec("alter table t add column extra text not null default 'yes'");
    expect((await statements.query('select * from t', [])).rows).toMatchObject([{ name: 'a', extra: 'yes' }]);

    // Inside a transaction the error has aborted it: it is thrown, and the statement is parsed
    // again after the rollback.
    await pglite.exec('alter table t drop column extra');
    await statements.query('begin', []);
    await expect(statements.query('select * from t', [])).rejects.toThrow('cached plan must not change result type');
    await statements.query('rollback', []);
    expect(Object.keys((await statements.query('select * from t', [])).rows[0] as object)).not.toContain('extra');
  });

  it('throws the database error (SQLSTATE, constraint) and leaves the session usable', async () => {
    const statements = new PGliteStatements(pglite);
    const insert = 'insert into t (name) values ($1)';
    await statements.query(insert, ['taken']);
    await expect(statements.query(insert, ['taken'])).rejects.toMatchObject({
      code: '23505',
      constraint: 't_name_key',
    });
    await expect(statements.query('select nonsense from t', [])).rejects.toMatchObject({ code: '42703' });
    expect((await statements.query('select name from t', [])).rows).toEqual([{ name: 'taken' }]);
  });

  it('runs inside a transaction: its writes roll back, and an aborted one refuses until ROLLBACK', async () => {
    const statements = new PGliteStatements(pglite);
    const insert = 'insert into t (name) values ($1)';
    await statements.query('begin', []);
    await statements.query(insert, ['in the transaction']);
    await statements.query('rollback', []);
    expect((await statements.query('select count(*)::int as n from t', [])).rows).toEqual([{ n: 0 }]);

    await statements.query('begin', []);
    await statements.query(insert, ['twice']);
    await expect(statements.query(insert, ['twice'])).rejects.toMatchObject({ code: '23505' });
    await expect(statements.query('select 1 as one', [])).rejects.toMatchObject({ code: '25P02' });
    await statements.query('rollback', []);
    expect((await statements.query('select 1 as one', [])).rows).toEqual([{ one: 1 }]);
  });
});
