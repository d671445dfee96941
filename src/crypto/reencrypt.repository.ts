// SQL for reencrypt.ts. A value is current when it starts with the current key's prefix
// (compared with left(), not LIKE: a key id may hold `_`).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';

export interface SecretsRow {
  id: number;
  secret: string;
  previous_secret: string | null;
}

/** The next `limit` subscriptions with a secret not under the current key, after the id `afterId`. */
export async function subscriptionSecretsToReencrypt(
  db: Db,
  prefix: string,
  afterId: number,
  limit: number,
): Promise<SecretsRow[]> {
  // bigint: a string from PostgreSQL, a number from PGlite.
  const { rows } = await sql<Omit<SecretsRow, 'id'> & { id: number | string }>`
    select id, secret, previous_secret from webhook_subscriptions
     where id > ${afterId}
       and (left(secret, ${prefix.length}) <> ${prefix}
            or (previous_secret is not null and left(previous_secret, ${prefix.length}) <> ${prefix}))
     order by id
     limit ${limit}`.execute(db);
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

/** Writes the new values if the row still holds the ones read; 1 if it did. */
export async function rewriteSubscriptionSecrets(
  db: Db,
  read: SecretsRow,
  next: Omit<SecretsRow, 'id'>,
): Promise<number> {
  const result = await sql`
    update webhook_subscriptions set secret = ${next.secret}, previous_secret = ${next.previous_secret}
     where id = ${read.id} and secret = ${read.secret}
       and previous_secret is not distinct from ${read.previous_secret}`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

export interface AnswerRow {
  subject: string;
  key: string;
  body: string;
}

/**
 * The next `limit` live stored answers not under the current key, after the row `after` in the
 * primary key's order (its index walks them).
 */
export async function storedAnswersToReencrypt(
  db: Db,
  prefix: string,
  after: Pick<AnswerRow, 'subject' | 'key'>,
  limit: number,
): Promise<AnswerRow[]> {
  const { rows } = await sql<AnswerRow>`
    select subject, key, body from idempotency_keys
     where (subject, key) > (${after.subject}, ${after.key})
       and body is not null and left(body, ${prefix.length}) <> ${prefix} and expires_at > now()
     order by subject, key
     limit ${limit}`.execute(db);
  return rows;
}

/**
 * Writes each answer's new body if it still holds the one read, in one statement for the batch;
 * how many were written.
 */
export async function rewriteAnswerBodies(db: Db, rows: readonly (AnswerRow & { next: string })[]): Promise<number> {
  if (rows.length === 0) return 0;
  const values = sql.join(rows.map((r) => sql`(${r.subject}, ${r.key}, ${r.body}, ${r.next})`));
  const result = await sql`
    update idempotency_keys k set body = v.next
      from (values ${values}) as v(subject, key, body, next)
     where k.subject = v.subject and k.key = v.key and k.body = v.body`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * Whether the values with `prefix` have settled: the first pass that left every value with it
 * started more than `ms` ago (encryption_passes). Undefined when no such pass finished.
 */
export async function passSettled(db: Db, prefix: string, ms: number): Promise<boolean | undefined> {
  const { rows } = await sql<{ settled: boolean }>`
    select started_at < now() - ${ms} * interval '1 millisecond' as settled
      from encryption_passes where prefix = ${prefix}`.execute(db);
  return rows[0]?.settled;
}

/**
 * Records a finished pass: the first one's start stays (the values' era began then), the latest
 * one's finish replaces the last.
 */
export async function recordPass(db: Db, prefix: string, startedAt: Date): Promise<void> {
  await sql`
    insert into encryption_passes (prefix, started_at, finished_at) values (${prefix}, ${startedAt}, now())
    on conflict (prefix) do update set finished_at = excluded.finished_at`.execute(db);
}
