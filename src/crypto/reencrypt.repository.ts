// SQL for reencrypt.ts. A value is current when it starts with the current key's prefix
// (compared with left(), not LIKE: a key id may hold `_`).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';

export interface SecretsRow {
  id: number;
  secret: string;
  previous_secret: string | null;
}

export async function subscriptionSecretsToReencrypt(db: Db, prefix: string): Promise<SecretsRow[]> {
  const { rows } = await sql<SecretsRow>`
    select id, secret, previous_secret from webhook_subscriptions
     where left(secret, ${prefix.length}) <> ${prefix}
        or (previous_secret is not null and left(previous_secret, ${prefix.length}) <> ${prefix})
     order by id`.execute(db);
  return rows;
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

/** Writes each answer's new body if it still holds the one read; how many were written. */
export async function rewriteAnswerBodies(db: Db, rows: readonly (AnswerRow & { next: string })[]): Promise<number> {
  let written = 0;
  for (const row of rows) {
    const result = await sql`
      update idempotency_keys set body = ${row.next}
       where subject = ${row.subject} and key = ${row.key} and body = ${row.body}`.execute(db);
    written += Number(result.numAffectedRows ?? 0n);
  }
  return written;
}

/** Whether a pass that left every value with `prefix` has finished (encryption_passes). */
export async function passFinished(db: Db, prefix: string): Promise<boolean> {
  const { rows } = await sql<{ one: number }>`select 1 as one from encryption_passes where prefix = ${prefix}`.execute(
    db,
  );
  return rows.length > 0;
}

/** Records a finished pass (the latest one's times, if several instances finish one). */
export async function recordPass(db: Db, prefix: string, startedAt: Date): Promise<void> {
  await sql`
    insert into encryption_passes (prefix, started_at, finished_at) values (${prefix}, ${startedAt}, now())
    on conflict (prefix) do update set started_at = excluded.started_at, finished_at = excluded.finished_at`.execute(
    db,
  );
}
