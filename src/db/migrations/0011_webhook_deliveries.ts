import { sql, type Kysely } from 'kysely';

// docs/webhooks.md: one delivery per event and subscription that wants it, made in the event's own
// transaction (events/index.ts), so that a subscription receives exactly the events committed
// after it existed. Dispatchers claim due deliveries with FOR UPDATE SKIP LOCKED and a lease;
// a later event for the same subscription and subject waits while an earlier one is pending or
// failed (being retried).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table webhook_deliveries (
      id                   bigint generated always as identity primary key,
      subscription_id      bigint not null references webhook_subscriptions (id) on delete cascade,
      event_sequence       bigint not null references events (sequence) on delete cascade,
      subject              text not null,
      status               text not null default 'pending'
                           constraint webhook_deliveries_status_check check (status in ('pending', 'delivered', 'failed', 'dead')),
      attempts             integer not null default 0,
      next_attempt_at      timestamptz not null default now(),
      leased_until         timestamptz,
      last_attempt_at      timestamptz,
      last_response_status integer,
      last_error           text,
      created_at           timestamptz not null default now()
    )`.execute(db);
  // The dispatcher's claim: due and undelivered, oldest first.
  await sql`create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at, id)
    where status in ('pending', 'failed')`.execute(db);
  // Per subscription and subject, the earlier undelivered ones (the order rule); the log's list.
  await sql`create index webhook_deliveries_subject_idx on webhook_deliveries (subscription_id, subject, event_sequence)
    where status in ('pending', 'failed')`.execute(db);
  await sql`create index webhook_deliveries_subscription_idx on webhook_deliveries (subscription_id, id)`.execute(db);
  await sql`create index webhook_deliveries_event_idx on webhook_deliveries (event_sequence)`.execute(db);
  // Wakes every instance's dispatcher when new deliveries commit (a wake-up, never the store;
  // PostgreSQL sends it at commit and folds repeats within a transaction into one).
  await sql`
    create function webhook_deliveries_notify() returns trigger language plpgsql as $$
    begin
      perform pg_notify('resource_api_webhooks', '');
      return null;
    end $$`.execute(db);
  await sql`create trigger webhook_deliveries_notify after insert on webhook_deliveries
    for each statement execute function webhook_deliveries_notify()`.execute(db);
}
