// SQL for webhook deliveries (migration 0011).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/** A claimed delivery with what sending it needs. */
export interface ClaimedDelivery {
  id: number;
  subscription_id: number;
  attempts: number;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  event_id: string;
  event_type: string;
  subject: string;
  time: Date;
  data: string;
}

/**
 * Claims up to `limit` due deliveries for `leaseMs`: not delivered or dead, due, not leased by
 * a live dispatcher, of an enabled subscription, and with no earlier undelivered event for the
 * same subscription and subject. SKIP LOCKED lets every instance claim at once without waiting
 * on each other or taking the same row; the lease makes a dead instance's claims due again.
 */
export async function claimDeliveries(db: Db, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const { rows } = await sql<ClaimedDelivery>`
    with due as (
      select d.id from webhook_deliveries d
       where d.status in ('pending', 'failed')
         and d.next_attempt_at <= now()
         and (d.leased_until is null or d.leased_until < now())
         and exists (select 1 from webhook_subscriptions s where s.id = d.subscription_id and s.enabled)
         and not exists (
           select 1 from webhook_deliveries p
            where p.subscription_id = d.subscription_id and p.subject = d.subject
              and p.event_sequence < d.event_sequence and p.status in ('pending', 'failed'))
       order by d.next_attempt_at, d.id
       limit ${limit}
       for update of d skip locked
    )
    update webhook_deliveries w
       set leased_until = now() + ${leaseMs} * interval '1 millisecond', attempts = w.attempts + 1,
           last_attempt_at = now()
      from due, webhook_subscriptions s, events e
     where w.id = due.id and s.id = w.subscription_id and e.sequence = w.event_sequence
    returning w.id, w.subscription_id, w.attempts, s.url, s.secret, s.previous_secret, s.previous_secret_expires_at,
              e.id::text as event_id, e.type as event_type, e.subject, e.time, e.data`.execute(db);
  return rows;
}

export interface Outcome {
  status: 'delivered' | 'failed' | 'dead';
  responseStatus: number | null;
  error: string | null;
  /** When a failed delivery is tried again. */
  nextAttemptAt?: Date;
}

/** Records an attempt's outcome and releases the lease. */
export async function recordOutcome(db: Db, id: number, outcome: Outcome): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({
      status: outcome.status,
      last_response_status: outcome.responseStatus,
      last_error: outcome.error,
      leased_until: null,
      ...(outcome.nextAttemptAt ? { next_attempt_at: outcome.nextAttemptAt } : {}),
    })
    .where('id', '=', id)
    .execute();
}

/** A receiver answered 410 Gone: no more deliveries to it until it is enabled again. */
export async function disableSubscription(db: Db, id: number): Promise<void> {
  await db.updateTable('webhook_subscriptions').set({ enabled: false }).where('id', '=', id).execute();
}
