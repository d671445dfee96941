import { sql, type Kysely } from 'kysely';

// docs/webhooks.md: webhook subscriptions. The secret signs deliveries (Standard Webhooks), so it is
// kept as it was given out; after a rotation the previous one signs too until it expires.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table webhook_subscriptions (
      id                         bigint generated always as identity primary key,
      url                        text not null constraint webhook_subscriptions_url_check check (char_length(url) <= 2048),
      events                     text[] not null constraint webhook_subscriptions_events_check check (cardinality(events) between 1 and 20),
      description                text constraint webhook_subscriptions_description_check check (char_length(description) <= 500),
      enabled                    boolean not null default true,
      secret                     text not null,
      previous_secret            text,
      previous_secret_expires_at timestamptz,
      created_at                 timestamptz not null default now(),
      updated_at                 timestamptz not null default now()
    )`.execute(db);
}
