import { sql, type Kysely } from 'kysely';

// Migration 0016's webhook_record_delivered keeps one generic plan per session, made at its first
// call. A session whose first call came while webhook_deliveries was small (a fresh deployment,
// or a table not yet analyzed) planned a sequential scan and a hash join, and kept that plan for
// the connection's life: every record then read the whole table. In `npm run bench -- --webhooks`
// (pg_stat_statements) its update went from 0.1–0.2 ms to 13.5 ms a call as 60,000 deliveries
// piled up. Like webhook_claim, it now plans without sequential scans: a primary-key lookup per id.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter function webhook_record_delivered(bigint[], integer[]) set enable_seqscan = off`.execute(db);
}
