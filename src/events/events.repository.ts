// SQL for the outbox.
import type { Db } from '../db/database.js';
import type { EventsTable } from './events.table.js';
import type { Insertable, Selectable } from 'kysely';

export type EventRow = Selectable<EventsTable>;

export async function insertEvent(db: Db, row: Insertable<EventsTable>): Promise<void> {
  await db.insertInto('events').values(row).execute();
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
