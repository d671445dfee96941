import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from './database.js';

/** What runs once a transaction has committed, by transaction (never kept past a rollback). */
const afterCommitHooks = new WeakMap<Transaction<Database>, (() => void)[]>();

/** The database each open transaction belongs to (Kysely's Transaction does not say). */
const databases = new WeakMap<Transaction<Database>, Kysely<Database>>();

/** `trx` was opened on `db`: whoever opens a transaction calls it, so that databaseOf knows. */
export function opened(trx: Transaction<Database>, db: Kysely<Database>): void {
  databases.set(trx, db);
}

/**
 * The database `db` is or belongs to (undefined for a transaction not opened through transact or
 * a keyed request): what state kept per database, such as the dispatcher's hand-off of new
 * webhook deliveries (events/index.ts), is keyed by.
 */
export function databaseOf(db: Db): Kysely<Database> | undefined {
  return db.isTransaction ? databases.get(db as Transaction<Database>) : db;
}

/**
 * Runs `work` in a transaction: a new one, or the one `db` already is (a request sent with an
 * Idempotency-Key runs in one, so that its stored outcome commits with its write; docs/api-guide.md#safe-retries).
 * An error inside an enclosing transaction aborts it; its owner rolls back.
 */
export async function transact<T>(db: Db, work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) return work(db as Transaction<Database>);
  let current: Transaction<Database> | undefined;
  const result = await db.transaction().execute((trx) => {
    current = trx;
    opened(trx, db);
    return work(trx);
  });
  if (current !== undefined) committed(current);
  return result;
}

/**
 * Runs `hook` after `trx` commits, in the same turn as the commit's answer; never when it rolls
 * back. For what must not be seen before the rows it names are (the dispatcher's queue of new
 * deliveries, events/index.ts).
 */
export function afterCommit(trx: Transaction<Database>, hook: () => void): void {
  const hooks = afterCommitHooks.get(trx);
  if (hooks === undefined) afterCommitHooks.set(trx, [hook]);
  else hooks.push(hook);
}

/** `trx` has committed: runs its afterCommit hooks. Whoever commits a transaction calls it. */
export function committed(trx: Transaction<Database>): void {
  const hooks = afterCommitHooks.get(trx);
  if (hooks === undefined) return;
  afterCommitHooks.delete(trx);
  for (const hook of hooks) hook();
}

/** `trx`'s writes so far were undone (rolled back to a savepoint): its hooks are dropped. */
export function discardAfterCommit(trx: Transaction<Database>): void {
  afterCommitHooks.delete(trx);
}
