import { sql, type Kysely } from 'kysely';

// Migration 0011's trigger sent a NOTIFY from inside every transaction that inserted into
// webhook_deliveries, and after every event's fan-out statement even when it inserted no row.
// A NOTIFY in a transaction takes a cluster-wide lock at commit, so every write of a user or an
// order was serialised on it (POST /api/v1/orders with one subscription: 375 req/s with the
// trigger, 488 without, 572 with the subscription paused). The instance that queued deliveries
// now notifies after its commit, at most every 50 ms (webhooks/delivery/).
//
// And room on each page for a claim's update (lease, attempts), which touches no indexed column:
// with it, PostgreSQL updates the row in place (HOT) instead of adding an entry to every index.
//
// And the claim's scan of due deliveries as a function with its own planner settings. Under a
// backlog the table grows faster than ANALYZE follows it; on an estimate of a few dozen due
// rows the planner fetched every due row (bitmap scan), checked the order rule on each and
// sorted them, for 32: 11 ms per claim at a backlog of 6,000, longer as it grew, and a dispatcher
// that fell further behind the further behind it was (360 deliveries/s at best). Walking the due
// index in order and stopping at `max_rows` costs the same at any backlog. (`offset 0` keeps each
// check a per-row probe of its index: pulled up into a join, the order rule was once planned as
// a scan of the whole subject index per row, 525 ms. And `rows 32`, a dispatcher's most: at the
// default estimate of 1,000 the claim joined its rows to the events by hashing the whole table.)
//
// And no foreign key from a delivery to its subscription. Every event's fan-out inserted a
// delivery referencing the same subscription row, and the key check share-locks that row: with
// many writers at once, PostgreSQL records the lockers as a MultiXact per change (measured:
// +850 µs of PostgreSQL CPU per order with one subscription). Deleting a subscription deletes
// its deliveries by trigger instead; a delivery that a concurrent write adds for a subscription
// being deleted is never claimed (the claim joins the subscription) and goes with its event.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries drop constraint webhook_deliveries_subscription_id_fkey`.execute(db);
  await sql`
    create function webhook_subscriptions_delete_deliveries() returns trigger language plpgsql as $$
    begin
      delete from webhook_deliveries d using gone g where d.subscription_id = g.id;
      return null;
    end $$`.execute(db);
  await sql`create trigger webhook_subscriptions_delete_deliveries after delete on webhook_subscriptions
    referencing old table as gone
    for each statement execute function webhook_subscriptions_delete_deliveries()`.execute(db);
  await sql`
    create function webhook_due_deliveries(max_rows integer) returns setof bigint
    language sql
    rows 32
    set enable_sort = off
    set enable_bitmapscan = off
    set enable_seqscan = off
    as $$
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
       for update of d skip locked
    $$`.execute(db);
  await sql`drop trigger webhook_deliveries_notify on webhook_deliveries`.execute(db);
  await sql`drop function webhook_deliveries_notify()`.execute(db);
  await sql`alter table webhook_deliveries set (fillfactor = 70)`.execute(db);
}
