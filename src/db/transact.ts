import type { Transaction } from 'kysely';
import type { Database, Db } from './database.js';

/**
 * Runs `work` in a transaction: a new one, or the one `db` already is (a request sent with an
 * Idempotency-Key runs in one, so that its stored outcome commits with its write; DESIGN §10).
 * An error inside an enclosing transaction aborts it; its owner rolls back.
 */
export function transact<T>(db: Db, work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db as Transaction<Database>) : db.transaction().execute(work);
}
