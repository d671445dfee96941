import { sql, type Kysely } from 'kysely';

// The dispatcher's claim and its record of delivered attempts as PL/pgSQL functions whose plans
// are generic and kept for the session. As plain prepared statements, PostgreSQL planned both
// again at every execution (pg_stat_statements: plans = calls): the ids come as an array whose
// length a custom plan knows and a generic plan guesses (10), so the custom plan always looked
// cheaper, and planning the claim (a join of four relations, two checks and a CTE) cost more
// than running it (1.4 ms against 1.0 ms a claim). The plans themselves are the same: primary-key
// lookups for the ids, and for the scan the ordered walk of the due index that migration 0013
// forced (its function is replaced by the scan branch here, with the same settings).
//
// A delivery is claimable when it is pending or failed, due, not leased by a live dispatcher,
// of an enabled subscription, and no earlier event of its subscription and subject is still
// undelivered (the order rule). The two branches check exactly that, one over the given ids,
// one walking the due index in order until `max_rows` pass.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function webhook_claim(ids bigint[], max_rows integer, lease_ms integer)
    returns table (
      id bigint, subscription_id bigint, attempts integer, url text, secret text, previous_secret text,
      previous_secret_expires_at timestamptz, event_id text, event_type text, subject text, "time" timestamptz,
      data text)
    language plpgsql
    set plan_cache_mode = force_generic_plan
    set enable_sort = off
    set enable_bitmapscan = off
    set enable_seqscan = off
    as $$
    #variable_conflict use_column
    begin
      if ids is not null then
        return query
        with due as (
          select d.id from unnest(ids) as x (id)
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
           for update of d skip locked)
        update webhook_deliveries w
           set leased_until = now() + lease_ms * interval '1 millisecond', attempts = w.attempts + 1,
               last_attempt_at = now()
          from due, webhook_subscriptions s, events e
         where w.id = due.id and s.id = w.subscription_id and e.sequence = w.event_sequence
        returning w.id, w.subscription_id, w.attempts, s.url, s.secret, s.previous_secret,
                  s.previous_secret_expires_at, e.id::text, e.type, e.subject, e.time, e.data;
      else
        return query
        with due as (
          select d.id from webhook_deliveries d
           where d.status in ('pending', 'failed')
             and d.next_attempt_at <= now()
             and (d.leased_until is null or d.leased_until < now())
             and exists (select 1 from webhook_subscriptions s where s.id = d.subscription_id and s.enabled offset 0)
             and not exists (
               select 1 from webhook_deliveries p
                where p.subscription_id = d.subscription_id and p.subject = d.subject
                  and p.event_sequence < d.event_sequence and p.status in ('pending', 'failed')
               offset 0)
           order by d.next_attempt_at, d.id
           limit max_rows
           for update of d skip locked)
        update webhook_deliveries w
           set leased_until = now() + lease_ms * interval '1 millisecond', attempts = w.attempts + 1,
               last_attempt_at = now()
          from due, webhook_subscriptions s, events e
         where w.id = due.id and s.id = w.subscription_id and e.sequence = w.event_sequence
        returning w.id, w.subscription_id, w.attempts, s.url, s.secret, s.previous_secret,
                  s.previous_secret_expires_at, e.id::text, e.type, e.subject, e.time, e.data;
      end if;
    end $$`.execute(db);
  await sql`drop function webhook_due_deliveries(integer)`.execute(db);
  await sql`
    create function webhook_record_delivered(ids bigint[], statuses integer[]) returns void
    language plpgsql
    set plan_cache_mode = force_generic_plan
    as $$
    begin
      update webhook_deliveries w
         set status = 'delivered', last_response_status = v.status, last_error = null, leased_until = null
        from unnest(ids, statuses) as v (id, status)
       where w.id = v.id;
    end $$`.execute(db);
}
