import { sql, type Kysely } from 'kysely';

// The background re-encryption of secrets at rest (src/crypto/reencrypt.ts) records here each
// pass it finished, by the prefix of the values it left (the form and the key id, never the
// key), so that a start with nothing left to rewrite reads this one row instead of both tables.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table encryption_passes (
      prefix      text primary key,
      started_at  timestamptz not null,
      finished_at timestamptz not null
    )`.execute(db);
}
