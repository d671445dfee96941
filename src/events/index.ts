// Events (DESIGN §12). What other resources use: recordEvent, inside the transaction of the
// change it reports, so that the change and its event commit together or not at all.
import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { afterCommit } from '../db/transact.js';
import type { EventType } from './event-types.js';
import { insertEvent, type EventRow } from './events.repository.js';
export { recordEventWith, type EventOfRow } from './events.repository.js';

export { EVENT_PATTERNS, EVENT_TYPES, matchesPattern, type EventPattern, type EventType } from './event-types.js';
export type { EventRow } from './events.repository.js';

export interface NewEvent {
  type: EventType;
  /** `users/<id>` or `orders/<id>`. */
  subject: `users/${number}` | `orders/${number}`;
  /** The CloudEvent's data as JSON text: the v1 representation after the change, or `{"id":…}`. */
  data: string;
  /** The user the event is about (DESIGN §2): the user itself, or the order's customer. */
  owner: number;
}

let queued = 0;
let recorded = 0;

/**
 * How many times this process has queued webhook deliveries: the dispatcher compares it after
 * a request to know whether to look for due deliveries at once (webhooks/dispatcher.ts).
 */
export function deliveriesQueued(): number {
  return queued;
}

/** At most this many ids wait for the dispatcher; older ones are left to its scan. */
const QUEUED_IDS_MAX = 10_000;
let queuedIds: number[] = [];

/**
 * The ids of deliveries this process queued and committed since the last call (the dispatcher
 * claims them by id; one that is not due, an earlier event of its subject still undelivered, is
 * left to its scan). A primary-key claim instead of a scan of the due index: under load, that
 * index's head is dead rows until the next vacuum.
 */
export function takeQueuedDeliveries(): number[] {
  const ids = queuedIds;
  queuedIds = [];
  return ids;
}

/**
 * How many events this process has written: the event stream compares it after a request to
 * know whether to read new events at once (events/stream.ts).
 */
export function eventsRecorded(): number {
  return recorded;
}

/** Writes the event in the transaction of the change it reports (a service's `transact`). */
export async function recordEvent(trx: Transaction<Database>, event: NewEvent): Promise<void> {
  eventRecorded(trx, await insertEvent(trx, { ...event, id: randomUUID(), time: new Date() }));
}

/**
 * An event and its deliveries were written by a statement on `db` (recordEventWith): counts it
 * for the event stream, and hands the deliveries to the dispatcher once they are there to be
 * claimed, at once after a statement outside any transaction or when `db`'s transaction
 * commits (a claim by id before the commit finds nothing, and the dispatcher would leave them
 * to its slower scan).
 */
export function eventRecorded(db: Db, deliveries: readonly number[]): void {
  recorded++;
  if (deliveries.length === 0) return;
  const queue = () => {
    queued++;
    if (queuedIds.length + deliveries.length > QUEUED_IDS_MAX) queuedIds = queuedIds.slice(deliveries.length);
    queuedIds.push(...deliveries);
  };
  if (db.isTransaction) afterCommit(db as Transaction<Database>, queue);
  else queue();
}

/** `{"id": <id>}`: the data of `*.deleted` and `user.password_changed` (DESIGN §12). */
export function idOnly(id: number): string {
  return `{"id":${String(id)}}`;
}

/**
 * The CloudEvents 1.0 JSON document (structured mode) of a stored event. `source` is
 * `<BASE_URL>/api/v1`: the deployment's, so it is added when the event is read.
 */
export function toCloudEvent(row: Pick<EventRow, 'id' | 'type' | 'subject' | 'time' | 'data'>, source: string): string {
  const head = JSON.stringify({
    specversion: '1.0',
    id: row.id,
    source,
    type: row.type,
    subject: row.subject,
    time: row.time.toISOString(),
    datacontenttype: 'application/json',
  });
  return `${head.slice(0, -1)},"data":${row.data}}`;
}
