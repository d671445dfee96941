import { sql, type Kysely } from 'kysely';

// docs/api-guide.md#safe-retries: users and orders carry a version, as products do: every change increments it,
// and it is their ETag ("<version>") for If-None-Match and If-Match.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table users add column version integer not null default 1`.execute(db);
  await sql`alter table orders add column version integer not null default 1`.execute(db);
}
