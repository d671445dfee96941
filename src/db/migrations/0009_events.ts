import { sql, type Kysely } from 'kysely';

// docs/webhooks.md, the transactional outbox: one row per change of a user or an order, written in
// the change's own transaction. `sequence` orders the events; `tx` is the writing transaction's
// id, so that a reader can stay below the oldest transaction still open (a longer transaction
// may commit a smaller sequence later). `data` is the CloudEvent's data member, as JSON text;
// the envelope is made when the event is read (events/index.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table events (
      sequence bigint generated always as identity primary key,
      id       uuid not null constraint events_id_key unique,
      type     text not null,
      subject  text not null,
      time     timestamptz not null,
      data     text not null,
      tx       xid8 not null default pg_current_xact_id()
    )`.execute(db);
  await sql`create index events_time_idx on events (time)`.execute(db);
}
