import { sql, type Kysely } from 'kysely';

// No foreign key from a delivery to its event, as migration 0013 did for its subscription. The
// key's check ran at every fan-out: a query per delivery and a share lock on the event row just
// written, which PostgreSQL records on the row (WAL) before the commit. Under POST
// /api/v1/orders with one subscription the fan-out cost 170 µs of PostgreSQL time per order
// (pg_stat_statements) and 12 WAL records against 5 without. A delivery is inserted by the same
// statement as its event, so the event exists; deleting events (the retention purge) deletes
// their deliveries by trigger, through the event index.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries drop constraint webhook_deliveries_event_sequence_fkey`.execute(db);
  await sql`
    create function events_delete_deliveries() returns trigger language plpgsql as $$
    begin
      delete from webhook_deliveries d using gone g where d.event_sequence = g.sequence;
      return null;
    end $$`.execute(db);
  await sql`create trigger events_delete_deliveries after delete on events
    referencing old table as gone
    for each statement execute function events_delete_deliveries()`.execute(db);
}
