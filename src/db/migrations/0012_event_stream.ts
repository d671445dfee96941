import { sql, type Kysely } from 'kysely';

// docs/webhooks.md, the event stream (GET /api/v1/events). `owner` is the user an event is about for
// the ownership rule of docs/api-guide.md#authentication-and-scopes: the user itself for user events, the order's customer for
// order events (an `order.deleted` event's data no longer says whose the order was). The stream
// reads in `(tx, sequence)` order below the oldest open transaction, from this index.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table events add column owner bigint`.execute(db);
  // Events written before this migration: the subject's user, or the customer in the order's
  // data; an `order.deleted` whose order is gone keeps none (only admin callers see it).
  await sql`
    update events e set owner = case
      when e.type like 'user.%' then split_part(e.subject, '/', 2)::bigint
      when e.data::jsonb ? 'customerId' then (e.data::jsonb ->> 'customerId')::bigint
      else (select o.customer_id from orders o where o.id = split_part(e.subject, '/', 2)::bigint)
    end`.execute(db);
  await sql`create index events_stream_idx on events (tx, sequence)`.execute(db);
}
