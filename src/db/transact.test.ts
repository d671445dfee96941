import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from './database.js';
import { afterCommit, committed, discardAfterCommit, transact } from './transact.js';

// A Kysely whose driver does nothing: transact's own bookkeeping is what is tested here (the
// HTTP suites run it against both engines through every write).
function nullDb(): Kysely<Database> {
  return new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createQueryCompiler: () => new PostgresQueryCompiler(),
      createIntrospector: (k) => new PostgresIntrospector(k),
    },
  });
}

describe('afterCommit', () => {
  it('runs a transaction’s hooks once it has committed, in order, and never before', async () => {
    const ran: string[] = [];
    const result = await transact(nullDb(), async (trx) => {
      afterCommit(trx, () => ran.push('first'));
      afterCommit(trx, () => ran.push('second'));
      await Promise.resolve();
      expect(ran).toEqual([]);
      return 42;
    });
    expect(result).toBe(42);
    expect(ran).toEqual(['first', 'second']);
  });

  it('never runs them when the transaction rolls back', async () => {
    const ran: string[] = [];
    await expect(
      transact(nullDb(), async (trx) => {
        afterCommit(trx, () => ran.push('hook'));
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(ran).toEqual([]);
  });

  it('inside an enclosing transaction, leaves them to whoever commits it (an Idempotency-Key request)', async () => {
    const ran: string[] = [];
    const outer = await nullDb().startTransaction().execute();
    await transact(outer, async (trx) => {
      afterCommit(trx, () => ran.push('hook'));
    });
    expect(ran).toEqual([]);
    await outer.commit().execute();
    committed(outer);
    expect(ran).toEqual(['hook']);
    committed(outer); // once only
    expect(ran).toEqual(['hook']);
  });

  it('drops them when the writes they follow are undone', async () => {
    const ran: string[] = [];
    const outer = await nullDb().startTransaction().execute();
    afterCommit(outer, () => ran.push('hook'));
    discardAfterCommit(outer);
    await outer.commit().execute();
    committed(outer);
    expect(ran).toEqual([]);
  });
});
