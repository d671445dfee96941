// SQL for webhook deliveries (migration 0011).
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { LeasedDelivery } from '../events/index.js';

/** A claimed delivery with what sending it needs (the same as one leased at its insert). */
export type ClaimedDelivery = LeasedDelivery;

/**
 * Claims up to `limit` due deliveries for `leaseMs`, or the given ones among `ids` that are
 * claimable: not delivered or dead, due, not leased by a live dispatcher, of an enabled
 * subscription that is not among `busy` (those the dispatcher has enough attempts of), and with
 * no earlier undelivered event for the same subscription and subject. SKIP LOCKED lets every
 * instance claim at once without waiting on each other or taking the same row; the lease makes a
 * dead instance's claims due again, and each claim's fencing token fences off the attempt of a
 * lapsed one. Migration 0020's function holds the SQL, so that its plans are generic and made
 * once per connection.
 */
export async function claimDeliveries(
  db: Db,
  limit: number,
  leaseMs: number,
  ids?: readonly number[],
  busy: readonly number[] = [],
): Promise<ClaimedDelivery[]> {
  const { rows } = await sql<ClaimedDelivery>`
    select * from webhook_claim(string_to_array(${ids === undefined ? null : ids.join(',')}, ',')::bigint[],
                                ${limit}::integer, ${leaseMs}::integer,
                                string_to_array(${busy.length === 0 ? null : busy.join(',')}, ',')::bigint[])`.execute(
    db,
  );
  return rows;
}

/** A delivery under one lease: its id and the lease's fencing token (migration 0020). */
export interface Lease {
  id: number;
  fencing_token: number;
}

export interface Outcome {
  status: 'delivered' | 'failed' | 'dead';
  responseStatus: number | null;
  error: string | null;
  /** When a failed delivery is tried again. */
  nextAttemptAt?: Date;
}

/**
 * Gives back deliveries leased to this process (at their insert, or by a claim) that it will not
 * send (it is shutting down, or they waited in hand too long): due again at once, for any
 * instance, as if that lease had not been given; one asked for again meanwhile starts the whole
 * retry schedule. Only a lease still the one given is given back (its fencing token): a delivery
 * claimed elsewhere since is that instance's. The status is tested through coalesce() so that
 * each id is a primary-key lookup, never a scan of a partial index (migration 0020).
 */
export async function releaseLeased(db: Db, leases: readonly Lease[]): Promise<void> {
  if (leases.length === 0) return;
  await sql`
    update webhook_deliveries w
       set leased_until = null,
           attempts = case when w.redelivery_asked then 0 else w.attempts - 1 end,
           -- the lease given back was not an attempt made
           attempts_before = case when w.redelivery_asked then w.attempts_before + greatest(w.attempts - 1, 0)
                                  else w.attempts_before end,
           status = case when w.redelivery_asked then 'pending' else w.status end,
           next_attempt_at = case when w.redelivery_asked then now() else w.next_attempt_at end,
           last_attempt_at = case when w.attempts = 1 or w.redelivery_asked then null else w.last_attempt_at end,
           redelivery_asked = false
      from unnest(string_to_array(${leases.map((l) => l.id).join(',')}, ',')::bigint[],
                  string_to_array(${leases.map((l) => l.fencing_token).join(',')}, ',')::int[]) as v (id, token)
     where w.id = v.id and w.fencing_token = v.token and coalesce(w.status, '') in ('pending', 'failed')`.execute(db);
}

/**
 * Records an attempt's outcome under its lease and releases the lease; true when the delivery
 * was asked for again while the attempt was open (it is then pending, due at once, with the
 * whole retry schedule). Nothing is written when the lease is no longer the attempt's.
 */
export async function recordOutcome(db: Db, lease: Lease, outcome: Outcome): Promise<boolean> {
  const { rows } = await sql<{ again: boolean }>`
    update webhook_deliveries
       set status = case when redelivery_asked then 'pending' else ${outcome.status} end,
           attempts = case when redelivery_asked then 0 else attempts end,
           attempts_before = case when redelivery_asked then attempts_before + attempts else attempts_before end,
           next_attempt_at = case when redelivery_asked then now()
                                  else coalesce(${outcome.nextAttemptAt ?? null}::timestamptz, next_attempt_at) end,
           redelivery_asked = false, last_response_status = ${outcome.responseStatus},
           last_error = ${outcome.error}, leased_until = null
     where id = ${lease.id} and fencing_token = ${lease.fencing_token}
    returning status = 'pending' as again`.execute(db);
  return rows[0]?.again ?? false;
}

/**
 * Records several deliveries as delivered in one statement (the dispatcher gathers those that
 * finish while the previous such statement runs), each under its lease, releasing it; returns
 * how many had been asked for again meanwhile (pending again, due now).
 */
export async function recordDelivered(
  db: Db,
  delivered: readonly (Lease & { responseStatus: number })[],
): Promise<number> {
  if (delivered.length === 0) return 0;
  const ids = delivered.map((d) => String(d.id)).join(',');
  const tokens = delivered.map((d) => String(d.fencing_token)).join(',');
  const statuses = delivered.map((d) => String(d.responseStatus)).join(',');
  const { rows } = await sql<{ again: number | string }>`
    select webhook_record_delivered(string_to_array(${ids}, ',')::bigint[], string_to_array(${tokens}, ',')::int[],
                                    string_to_array(${statuses}, ',')::int[]) as again`.execute(db);
  return Number(rows[0]?.again ?? 0);
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
        // Every attempt made, those before a redelivery too (migration 0022).
        sql<number>`d.attempts_before + d.attempts`.as('attempts'),
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

/**
 * Queues a delivery again with the whole retry schedule; false if it is not the subscription's.
 * With no live lease it is due now, and its fencing token moves on, so that the outcome of an
 * attempt whose lease lapsed cannot overwrite what follows. With an attempt open (a live lease)
 * it is queued behind it: the lease stays, and the outcome makes it pending again (migration 0020).
 */
export async function requeueDelivery(db: Db, subscriptionId: number, deliveryId: number): Promise<boolean> {
  const result = await sql`
    update webhook_deliveries
       set redelivery_asked = coalesce(leased_until > now(), false),
           status = case when leased_until > now() then status else 'pending' end,
           attempts = case when leased_until > now() then attempts else 0 end,
           attempts_before = case when leased_until > now() then attempts_before else attempts_before + attempts end,
           next_attempt_at = case when leased_until > now() then next_attempt_at else now() end,
           fencing_token = case when leased_until > now() then fencing_token else fencing_token + 1 end,
           leased_until = case when leased_until > now() then leased_until end
     where id = ${deliveryId} and subscription_id = ${subscriptionId}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/** Deliveries still to be sent (pending or failed), and the age of the oldest, in seconds. */
export async function pendingStats(db: Db): Promise<{ pending: number; oldestSeconds: number }> {
  const { rows } = await sql<{ pending: number | string; oldest: number | string | null }>`
    select count(*) as pending, extract(epoch from now() - min(created_at)) as oldest
      from webhook_deliveries where status in ('pending', 'failed')`.execute(db);
  return { pending: Number(rows[0]?.pending ?? 0), oldestSeconds: Number(rows[0]?.oldest ?? 0) };
}
