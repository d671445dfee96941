// SQL for the outbox.
import type { Db } from '../db/database.js';
import type { EventsTable } from './events.table.js';
import type { Insertable, Selectable } from 'kysely';

export type EventRow = Selectable<EventsTable>;

export async function insertEvent(db: Db, row: Insertable<EventsTable>): Promise<void> {
  await db.insertInto('events').values(row).execute();
}
