// SQL for webhook deliveries (migration 0011).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { EventType } from '../events/index.js';

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
  event_type: EventType;
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
export async function claimDeliveries(
  db: Db,
  limit: number,
  leaseMs: number,
  ids?: readonly number[],
): Promise<ClaimedDelivery[]> {
  // By id (the deliveries this instance just queued): a primary-key lookup each (`id = any(…)`
  // would let the planner walk the due index instead). Otherwise the due index in order, through
  // migration 0013's function, whose plan stays an ordered index walk however stale the
  // statistics are.
  const due =
    ids === undefined
      ? sql`select id from webhook_due_deliveries(${limit}::integer) as id`
      : sql`
      select d.id from unnest(string_to_array(${ids.join(',')}, ',')::bigint[]) as x (id)
        join webhook_deliveries d on d.id = x.id
       where d.status in ('pending', 'failed')
         and d.next_attempt_at <= now()
         and (d.leased_until is null or d.leased_until < now())
         and exists (select 1 from webhook_subscriptions s where s.id = d.subscription_id and s.enabled offset 0)
         and not exists (
           select 1 from webhook_deliveries p
            where p.subscription_id = d.subscription_id and p.subject = d.subject
              and p.event_sequence < d.event_sequence and p.status in ('pending', 'failed')
           offset 0)
       order by d.id
       for update of d skip locked`;
  const { rows } = await sql<ClaimedDelivery>`
    with due as (${due})
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

/**
 * Records several deliveries as delivered in one statement (the dispatcher gathers those that
 * finish while the previous such statement runs), releasing their leases.
 */
export async function recordDelivered(
  db: Db,
  delivered: readonly { id: number; responseStatus: number }[],
): Promise<void> {
  if (delivered.length === 0) return;
  const ids = delivered.map((d) => String(d.id)).join(',');
  const statuses = delivered.map((d) => String(d.responseStatus)).join(',');
  await sql`
    update webhook_deliveries w
       set status = 'delivered', last_response_status = v.status, last_error = null, leased_until = null
      from unnest(string_to_array(${ids}, ',')::bigint[], string_to_array(${statuses}, ',')::int[]) as v (id, status)
     where w.id = v.id`.execute(db);
}

/** A receiver answered 410 Gone: no more deliveries to it until it is enabled again. */
export async function disableSubscription(db: Db, id: number): Promise<void> {
  await db.updateTable('webhook_subscriptions').set({ enabled: false }).where('id', '=', id).execute();
}

export interface DeliveryLogRow {
  id: number;
  event_id: string;
  event_type: string;
  status: 'pending' | 'delivered' | 'failed' | 'dead';
  attempts: number;
  last_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  next_attempt_at: Date;
}

/** A subscription's deliveries, newest first, optionally of one status, and their total. */
export async function listDeliveries(
  db: Db,
  subscriptionId: number,
  status: DeliveryLogRow['status'] | undefined,
  limit: number,
  offset: number,
): Promise<{ rows: DeliveryLogRow[]; total: number }> {
  const filtered = () => {
    let q = db.selectFrom('webhook_deliveries as d').where('d.subscription_id', '=', subscriptionId);
    if (status !== undefined) q = q.where('d.status', '=', status);
    return q;
  };
  const [rows, counted] = await Promise.all([
    filtered()
      .innerJoin('events as e', 'e.sequence', 'd.event_sequence')
      .select([
        'd.id',
        sql<string>`e.id::text`.as('event_id'),
        'e.type as event_type',
        'd.status',
        'd.attempts',
        'd.last_attempt_at',
        'd.last_response_status',
        'd.last_error',
        'd.next_attempt_at',
      ])
      .orderBy('d.id', 'desc')
      .limit(limit)
      .offset(offset)
      .execute(),
    filtered()
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirst(),
  ]);
  return { rows, total: counted?.count ?? 0 };
}

/** Queues a delivery again, due now with the whole retry schedule; false if it is not the subscription's. */
export async function requeueDelivery(db: Db, subscriptionId: number, deliveryId: number): Promise<boolean> {
  const result = await db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', attempts: 0, next_attempt_at: sql<Date>`now()`, leased_until: null })
    .where('id', '=', deliveryId)
    .where('subscription_id', '=', subscriptionId)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Deliveries still to be sent (pending or failed), and the age of the oldest, in seconds. */
export async function pendingStats(db: Db): Promise<{ pending: number; oldestSeconds: number }> {
  const { rows } = await sql<{ pending: number | string; oldest: number | string | null }>`
    select count(*) as pending, extract(epoch from now() - min(created_at)) as oldest
      from webhook_deliveries where status in ('pending', 'failed')`.execute(db);
  return { pending: Number(rows[0]?.pending ?? 0), oldestSeconds: Number(rows[0]?.oldest ?? 0) };
}
