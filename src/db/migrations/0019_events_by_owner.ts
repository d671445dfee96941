import { sql, type Kysely } from 'kysely';

// An event stream catching up for a caller without admin reads only that caller's events, in
// stream order: an index by owner and position serves it without reading the whole outbox.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index events_owner_position_idx on events (owner, tx, sequence)`.execute(db);
}
