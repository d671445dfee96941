import { sql, type Kysely } from 'kysely';

// docs/api-guide.md#safe-retries: the outcome of a request sent with an Idempotency-Key, kept until it expires.
// Keys are scoped by the caller (the token's sub). expires_at is indexed for the purge.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table idempotency_keys (
      subject     text not null,
      key         text not null,
      fingerprint text not null,
      status      smallint not null,
      headers     text not null, -- a JSON object, stored and read as text on both engines
      body        text,
      created_at  timestamptz not null default now(),
      expires_at  timestamptz not null,
      primary key (subject, key)
    )`.execute(db);
  await sql`create index idempotency_keys_expires_at on idempotency_keys (expires_at)`.execute(db);
}
