import { sql, type Kysely } from 'kysely';

// Never two attempts of one delivery at once, and an earlier attempt's outcome never overwrites a
// later one's (docs/webhooks.md, "Redelivery").
//
// `fencing_token` counts the leases a delivery was given (a claim, or the lease at its insert),
// and a redelivery that finds no live lease bumps it too. An attempt carries the token its lease
// had; its outcome is recorded only while the row still has that token, so the outcome of an
// attempt whose lease lapsed (its instance stalled, then woke) is dropped once another lease or
// a redelivery came after it.
//
// `redelivery_asked`: a redelivery asked while an attempt is open (a live lease) no longer clears
// the lease, which let the next claim send the same webhook-id beside the open attempt. It is
// queued behind it: the attempt's outcome is recorded (its status and error) and the delivery is
// then pending again, due at once, with the whole retry schedule.
//
// `busy`: subscriptions the claiming dispatcher already has WEBHOOK_MAX_IN_FLIGHT attempts of,
// open or in hand; their deliveries are passed over, so that a receiver that hangs holds its own
// subscription's slots and never the others'.
//
// Neither new column is indexed, so a claim's update stays in place (HOT, migration 0013).
//
// `events.trace_context`: the W3C `traceparent` of the request that wrote the event, while
// tracing is on and that request is sampled (docs/tracing.md); a delivery's attempt is a span of
// that trace and sends it on. The claim returns it.
//
// Plans that do not depend on the statistics. The function's plans are generic and kept for the
// session, made from the statistics of its first call; the two partial indexes (due, subject)
// hold only the undelivered rows, so planned while few were undelivered they look nearly empty,
// and a whole scan of one, or of the table, looked cheaper than probes. When a backlog then built
// up (a receiver down, or orders faster than one receiver answers), the claim by ids scanned the
// whole due index once per claim and, for the order rule, once per row: 28,000 undelivered rows
// made a claim of one id take 208 s (`npm run bench -- --webhooks`, EXPLAIN ANALYZE), every
// claim hit the statement time-out, and no delivery went out. Now only one plan fits each part:
// - the due index also requires `next_attempt_at is not null`, which the scan's
//   `next_attempt_at <= now()` implies and the order rule's check does not mention: that check
//   can only use the subject index, probed by (subscription, subject, sequence);
// - rows are reached by `= any(array)` on a primary key (the given ids; then the picked ids, their
//   events and subscriptions), so no join can start from a whole scan; the claim by ids tests the
//   status through coalesce(), which no partial index's predicate is proven from.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table events add column trace_context text`.execute(db);
  await sql`drop index webhook_deliveries_due_idx`.execute(db);
  await sql`create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at, id)
    where status in ('pending', 'failed') and next_attempt_at is not null`.execute(db);
  await sql`alter table webhook_deliveries
              add column fencing_token integer not null default 0,
              add column redelivery_asked boolean not null default false`.execute(db);
  // The lease at insert (events.repository.ts, fanOut) is the first.
  await sql`update webhook_deliveries set fencing_token = 1 where leased_until is not null`.execute(db);
  await sql`drop function webhook_claim(bigint[], integer, integer)`.execute(db);
  await sql`
    create function webhook_claim(ids bigint[], max_rows integer, lease_ms integer, busy bigint[])
    returns table (
      id bigint, subscription_id bigint, attempts integer, fencing_token integer, url text, secret text,
      previous_secret text, previous_secret_expires_at timestamptz, event_id text, event_type text, subject text,
      "time" timestamptz, data text, trace_context text)
    language plpgsql
    set plan_cache_mode = force_generic_plan
    set enable_sort = off
    set enable_bitmapscan = off
    set enable_seqscan = off
    as $$
    #variable_conflict use_column
    declare
      picked bigint[];
      sequences bigint[];
      subscriptions bigint[];
    begin
      if ids is not null then
        select array_agg(d.id), array_agg(d.event_sequence), array_agg(distinct d.subscription_id)
          into picked, sequences, subscriptions
          from (select d.id, d.event_sequence, d.subscription_id from webhook_deliveries d
                 where d.id = any (ids)
                   and coalesce(d.status, '') in ('pending', 'failed')
                   and d.next_attempt_at <= now()
                   and (d.leased_until is null or d.leased_until < now())
                   and (busy is null or d.subscription_id <> all (busy))
                   and exists (select 1 from webhook_subscriptions s where s.id = d.subscription_id and s.enabled offset 0)
                   and not exists (
                     select 1 from webhook_deliveries p
                      where p.subscription_id = d.subscription_id and p.subject = d.subject
                        and p.event_sequence < d.event_sequence and p.status in ('pending', 'failed')
                     offset 0)
                 for update of d skip locked) d;
      else
        select array_agg(d.id), array_agg(d.event_sequence), array_agg(distinct d.subscription_id)
          into picked, sequences, subscriptions
          from (select d.id, d.event_sequence, d.subscription_id from webhook_deliveries d
                 where d.status in ('pending', 'failed')
                   and d.next_attempt_at <= now()
                   and (d.leased_until is null or d.leased_until < now())
                   and (busy is null or d.subscription_id <> all (busy))
                   and exists (select 1 from webhook_subscriptions s where s.id = d.subscription_id and s.enabled offset 0)
                   and not exists (
                     select 1 from webhook_deliveries p
                      where p.subscription_id = d.subscription_id and p.subject = d.subject
                        and p.event_sequence < d.event_sequence and p.status in ('pending', 'failed')
                     offset 0)
                 order by d.next_attempt_at, d.id
                 limit max_rows
                 for update of d skip locked) d;
      end if;
      if picked is null then
        return;
      end if;
      return query
      with claimed as (
        update webhook_deliveries w
           set leased_until = now() + lease_ms * interval '1 millisecond',
               attempts = case when w.redelivery_asked then 1 else w.attempts + 1 end,
               redelivery_asked = false, fencing_token = w.fencing_token + 1, last_attempt_at = now()
         where w.id = any (picked)
        returning w.id, w.subscription_id, w.attempts, w.fencing_token, w.event_sequence)
      select c.id, c.subscription_id, c.attempts, c.fencing_token, s.url, s.secret, s.previous_secret,
             s.previous_secret_expires_at, e.id::text, e.type, e.subject, e.time, e.data, e.trace_context
        from claimed c
        join webhook_subscriptions s on s.id = c.subscription_id and s.id = any (subscriptions)
        join events e on e.sequence = c.event_sequence and e.sequence = any (sequences);
    end $$`.execute(db);
  await sql`drop function webhook_record_delivered(bigint[], integer[])`.execute(db);
  // Returns how many were asked for again meanwhile (pending again, due now), so that the
  // dispatcher looks for them at once.
  await sql`
    create function webhook_record_delivered(ids bigint[], tokens integer[], statuses integer[]) returns integer
    language plpgsql
    set plan_cache_mode = force_generic_plan
    set enable_seqscan = off
    as $$
    declare
      again integer;
    begin
      with recorded as (
        update webhook_deliveries w
           set status = case when w.redelivery_asked then 'pending' else 'delivered' end,
               attempts = case when w.redelivery_asked then 0 else w.attempts end,
               next_attempt_at = case when w.redelivery_asked then now() else w.next_attempt_at end,
               redelivery_asked = false, last_response_status = v.status, last_error = null, leased_until = null
          from unnest(ids, tokens, statuses) as v (id, token, status)
         where w.id = any (ids) and w.id = v.id and w.fencing_token = v.token
        returning w.status)
      select count(*) filter (where status = 'pending') into again from recorded;
      return again;
    end $$`.execute(db);
}
