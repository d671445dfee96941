// SQL for the outbox.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { EventsTable } from './events.table.js';
import type { Insertable, Selectable } from 'kysely';

export type EventRow = Selectable<EventsTable>;

/**
 * Inserts the event and, in the same statement, one webhook delivery for every enabled
 * subscription that wants its type (exactly, by `user.*` / `order.*`, or `*`): the outbox's
 * fan-out, committed with the change or not at all (DESIGN §12).
 */
export async function insertEvent(db: Db, row: Insertable<EventsTable>): Promise<number> {
  const result = await sql`
    with e as (
      insert into events (id, type, subject, time, data)
      values (${row.id}, ${row.type}, ${row.subject}, ${row.time}, ${row.data})
      returning sequence, type, subject
    )
    insert into webhook_deliveries (subscription_id, event_sequence, subject)
    select s.id, e.sequence, e.subject
      from e join webhook_subscriptions s
        on s.enabled and s.events && array[e.type, split_part(e.type, '.', 1) || '.*', '*']`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/**
 * Deletes up to `batch` events older than `cutoff`, oldest first; returns how many. Small
 * batches keep each delete's locks and WAL short on a large outbox.
 */
export async function purgeEventsBefore(db: Db, cutoff: Date, batch: number): Promise<number> {
  const result = await db
    .deleteFrom('events')
    .where('sequence', 'in', (eb) =>
      eb.selectFrom('events').select('sequence').where('time', '<', cutoff).orderBy('sequence').limit(batch),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
