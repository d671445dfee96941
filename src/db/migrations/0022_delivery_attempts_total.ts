import { sql, type Kysely } from 'kysely';

// A delivery's `attempts`, as the API shows it, never goes down. A redelivery starts the whole
// retry schedule again, which counts from the row's `attempts`; that count is reset by the
// redelivery (or, with an attempt open then, when that attempt ends or its lease is claimed) and
// the attempts made before it are kept in `attempts_before`. The API shows the sum. The two
// functions of migration 0020 are the same but for that column, kept where they reset the count.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries add column attempts_before integer not null default 0`.execute(db);
  await sql`
    create or replace function webhook_claim(ids bigint[], max_rows integer, lease_ms integer, busy bigint[])
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
               attempts_before = case when w.redelivery_asked then w.attempts_before + w.attempts else w.attempts_before end,
               redelivery_asked = false, fencing_token = w.fencing_token + 1, last_attempt_at = now()
         where w.id = any (picked)
        returning w.id, w.subscription_id, w.attempts, w.fencing_token, w.event_sequence)
      select c.id, c.subscription_id, c.attempts, c.fencing_token, s.url, s.secret, s.previous_secret,
             s.previous_secret_expires_at, e.id::text, e.type, e.subject, e.time, e.data, e.trace_context
        from claimed c
        join webhook_subscriptions s on s.id = c.subscription_id and s.id = any (subscriptions)
        join events e on e.sequence = c.event_sequence and e.sequence = any (sequences);
    end $$`.execute(db);
  await sql`
    create or replace function webhook_record_delivered(ids bigint[], tokens integer[], statuses integer[]) returns integer
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
               attempts_before = case when w.redelivery_asked then w.attempts_before + w.attempts else w.attempts_before end,
               next_attempt_at = case when w.redelivery_asked then now() else w.next_attempt_at end,
               redelivery_asked = false, last_response_status = v.status, last_error = null, leased_until = null
          from unnest(ids, tokens, statuses) as v (id, token, status)
         where w.id = any (ids) and w.id = v.id and w.fencing_token = v.token
        returning w.status)
      select count(*) filter (where status = 'pending') into again from recorded;
      return again;
    end $$`.execute(db);
}
