// The stored outcomes of requests sent with an Idempotency-Key (docs/api-guide.md#safe-retries), and the request
// transaction they commit in. idempotency.ts decides when; this file holds the SQL.
//
// A keyed request runs in one transaction: BEGIN, read a live stored outcome (replayed, locked
// or not) and take the key's advisory lock (a request that finds it taken and nothing stored is
// still racing the first), SAVEPOINT; then the
// handler's writes; then the outcome is inserted and everything commits together. A 409 or
// 422 outcome first rolls back to the savepoint, so that it is stored without a partial write.
import { sql, type ControlledTransaction, type Kysely } from 'kysely';
import { IdempotencyKeyInUse } from '../../errors.js';
import type { Database, Db } from '../../db/database.js';
import { committed, discardAfterCommit, opened } from '../../db/transact.js';

/** What a request sent with a key produced, as sent: replayed byte for byte. */
export interface StoredOutcome {
  fingerprint: string;
  status: number;
  headers: Record<string, string>;
  body: string | null;
}

/** A request's transaction, opened by `beginKeyed` and ended by `commitKeyed` or `rollbackKeyed`. */
export interface KeyedTransaction {
  /** Queries of the request's handler run here. */
  readonly db: Db;
  readonly subject: string;
  readonly key: string;
  readonly trx: ControlledTransaction<Database>;
}

export type KeyState = { kind: 'busy' } | { kind: 'stored'; outcome: StoredOutcome } | { kind: 'new' };

const SAVEPOINT = sql.raw('idempotency_key');

/**
 * Opens the request's transaction and takes the key's lock. 'busy': another request holds the
 * key (the transaction is already rolled back); 'stored': a live outcome exists (roll back
 * after replaying it); 'new': run the request in `keyed.db`.
 */
export async function beginKeyed(
  db: Kysely<Database>,
  subject: string,
  key: string,
): Promise<{ keyed: KeyedTransaction; state: KeyState }> {
  const trx = await db.startTransaction().execute();
  opened(trx, db);
  const keyed: KeyedTransaction = { db: trx, subject, key, trx };
  try {
    // The lock and the read in one round trip. A live stored outcome is replayed whoever holds
    // the lock (another replay, most likely): only a first request still running is 'busy'.
    const { rows } = await sql<{
      locked: boolean;
      fingerprint: string | null;
      status: number | null;
      headers: string | null;
      body: string | null;
    }>`
      select l.locked, k.fingerprint, k.status, k.headers, k.body
        from (select pg_try_advisory_xact_lock(hashtextextended(${subject} || ' ' || ${key}, 0)) as locked) l
        left join idempotency_keys k
          on k.subject = ${subject} and k.key = ${key} and k.expires_at > now()`.execute(trx);
    const row = rows[0];
    if (row !== undefined && row.fingerprint !== null) {
      const outcome: StoredOutcome = {
        fingerprint: row.fingerprint,
        status: Number(row.status),
        headers: JSON.parse(row.headers ?? '{}') as Record<string, string>,
        body: row.body,
      };
      return { keyed, state: { kind: 'stored', outcome } };
    }
    if (row?.locked !== true) {
      await trx.rollback().execute();
      return { keyed, state: { kind: 'busy' } };
    }
    await sql`savepoint ${SAVEPOINT}`.execute(trx);
    return { keyed, state: { kind: 'new' } };
  } catch (error) {
    await rollbackKeyed(keyed);
    throw error;
  }
}

/**
 * Stores the outcome under the key and commits it with the request's writes. `discardWrites`
 * first undoes them (a 409 or 422 is stored as the answer of a request that changed nothing).
 * Throws IdempotencyKeyInUse, with everything rolled back, when another request's outcome
 * under the key committed first.
 */
export async function commitKeyed(
  keyed: KeyedTransaction,
  outcome: StoredOutcome,
  ttlHours: number,
  discardWrites: boolean,
): Promise<void> {
  const { trx } = keyed;
  try {
    if (discardWrites) {
      await sql`rollback to savepoint ${SAVEPOINT}`.execute(trx);
      discardAfterCommit(trx);
    }
    // An expired row that the purge has not reached yet is replaced. A live one means another
    // request stored its outcome after this one looked: beginKeyed's read runs on the snapshot
    // its statement began with, which can predate the lock (the first request committed and
    // let go of the lock in between). Then this request's writes must not commit: it is rolled
    // back and answered 409 with Retry-After, and its retry replays the stored outcome.
    const { rows } = await sql<{ stored: number }>`
      insert into idempotency_keys (subject, key, fingerprint, status, headers, body, expires_at)
      values (${keyed.subject}, ${keyed.key}, ${outcome.fingerprint}, ${outcome.status},
              ${JSON.stringify(outcome.headers)}, ${outcome.body},
              now() + make_interval(secs => ${ttlHours * 3600}))
      on conflict (subject, key) do update
        set fingerprint = excluded.fingerprint, status = excluded.status, headers = excluded.headers,
            body = excluded.body, created_at = excluded.created_at, expires_at = excluded.expires_at
        where idempotency_keys.expires_at <= now()
      returning 1 as stored`.execute(trx);
    if (rows.length === 0) throw new IdempotencyKeyInUse();
    await trx.commit().execute();
  } catch (error) {
    await rollbackKeyed(keyed);
    throw error;
  }
  committed(trx);
}

/** Ends the request's transaction without keeping anything; safe to call more than once. */
export async function rollbackKeyed(keyed: KeyedTransaction): Promise<void> {
  if (keyed.trx.isCommitted || keyed.trx.isRolledBack) return;
  try {
    await keyed.trx.rollback().execute();
  } catch {
    // The connection is gone; PostgreSQL has rolled the transaction back itself.
  }
}

/** Deletes expired keys; returns how many. */
export async function purgeExpiredKeys(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('expires_at', '<=', sql<Date>`now()`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
