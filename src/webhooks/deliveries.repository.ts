// SQL for webhook deliveries (migration 0011).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { LeasedDelivery } from '../events/index.js';

/** A claimed delivery with what sending it needs (the same as one leased at its insert). */
export type ClaimedDelivery = LeasedDelivery;

/**
 * Claims up to `limit` due deliveries for `leaseMs`, or the given ones among `ids` that are
 * claimable: not delivered or dead, due, not leased by a live dispatcher, of an enabled
 * subscription, and with no earlier undelivered event for the same subscription and subject.
 * SKIP LOCKED lets every instance claim at once without waiting on each other or taking the
 * same row; the lease makes a dead instance's claims due again. Migration 0016's function holds
 * the SQL, so that its plans are generic and made once per connection.
 */
export async function claimDeliveries(
  db: Db,
  limit: number,
  leaseMs: number,
  ids?: readonly number[],
): Promise<ClaimedDelivery[]> {
  const { rows } = await sql<ClaimedDelivery>`
    select * from webhook_claim(string_to_array(${ids === undefined ? null : ids.join(',')}, ',')::bigint[],
                                ${limit}::integer, ${leaseMs}::integer)`.execute(db);
  return rows;
}

export interface Outcome {
  status: 'delivered' | 'failed' | 'dead';
  responseStatus: number | null;
  error: string | null;
  /** When a failed delivery is tried again. */
  nextAttemptAt?: Date;
}

/**
 * Gives back deliveries leased to this process at their insert that it will not send (it is
 * shutting down, or they waited in hand too long): due again at once, for any instance, as if
 * never claimed. Only a lease still the insert's is given back (its attempt is stamped with the
 * insert's time): a delivery sent again on request meanwhile and claimed by another instance is
 * that instance's now, and un-leasing it would let a third send it while the second does.
 */
export async function releaseLeased(db: Db, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`
    update webhook_deliveries
       set leased_until = null, attempts = 0, last_attempt_at = null
     where id = any(string_to_array(${ids.join(',')}, ',')::bigint[])
       and status = 'pending' and attempts = 1 and last_attempt_at = created_at`.execute(db);
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
    select webhook_record_delivered(string_to_array(${ids}, ',')::bigint[], string_to_array(${statuses}, ',')::int[])`.execute(
    db,
  );
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
