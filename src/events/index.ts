// Events (docs/webhooks.md). What other resources use: recordEvent, inside the transaction of the
// change it reports, so that the change and its event commit together or not at all.
import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { afterCommit, databaseOf } from '../db/transact.js';
import { activeTraceparent } from '../tracing/tracing.js';
import type { EventType } from './event-types.js';
import { insertEvent, type EventRow, type LeasedDelivery, type NewDeliveries } from './events.repository.js';
export {
  newDeliveries,
  recordedDeliveries,
  recordEventWith,
  type EventOfRow,
  type LeasedDelivery,
  type NewDeliveries,
} from './events.repository.js';

export { EVENT_PATTERNS, EVENT_TYPES, matchesPattern, type EventPattern, type EventType } from './event-types.js';
export type { EventRow } from './events.repository.js';

export interface NewEvent {
  type: EventType;
  /** `users/<id>` or `orders/<id>`. */
  subject: `users/${number}` | `orders/${number}`;
  /** The CloudEvent's data as JSON text: the v1 representation after the change, or `{"id":…}`. */
  data: string;
  /** The user the event is about (docs/api-guide.md#authentication-and-scopes): the user itself, or the order's customer. */
  owner: number;
}

let recorded = 0;

/** At most this many ids wait for a dispatcher; older ones are left to its scan. */
const HANDOFF_MAX = 10_000;
/** Deliveries are leased at insert only while fewer than this many leased ones wait in hand. */
const LEASED_IN_HAND_MAX = 1_000;

/**
 * What this process's writes hand to the dispatcher of one database (webhooks/dispatcher.ts),
 * once their transactions have committed: before that, a claim would find nothing.
 */
export interface DeliveryHandoff {
  /** Bumped at every hand-off: the dispatcher compares it after a request to know whether to look. */
  count: number;
  /** Set while a dispatcher runs: the lease new deliveries are inserted with (fanOut), in ms. */
  leaseMs: number | undefined;
  /** Ids of new deliveries, to claim by primary key (one not due yet is left to the scan). */
  ids: number[];
  /** New deliveries leased to this process at insert, to send as they are, and when each came. */
  leased: { delivery: LeasedDelivery; at: number }[];
  /** Leased deliveries the dispatcher holds, waiting for a slot of their subscription. */
  held: number;
}

const handoffs = new WeakMap<Kysely<Database>, DeliveryHandoff>();

/** The hand-off of new deliveries written on `db` (the dispatcher's; made by it at start-up). */
export function deliveryHandoff(db: Kysely<Database>): DeliveryHandoff {
  let handoff = handoffs.get(db);
  if (handoff === undefined) {
    handoff = { count: 0, leaseMs: undefined, ids: [], leased: [], held: 0 };
    handoffs.set(db, handoff);
  }
  return handoff;
}

/**
 * The lease, in ms, for the deliveries of an event of `type` written now on `db` (fanOut), or
 * null. Only an event that creates its subject is leased at insert: nothing earlier of that
 * subject can be waiting, so no look is needed for the order rule; a later event is claimed by
 * its dispatcher once its subject's earlier deliveries are done. None either when no
 * dispatcher of this process serves the database, or when that one already has enough in hand.
 */
export function deliveryLease(db: Db, type: EventType): number | null {
  if (!type.endsWith('.created')) return null;
  const database = databaseOf(db);
  const handoff = database === undefined ? undefined : handoffs.get(database);
  if (handoff?.leaseMs === undefined || handoff.leased.length + handoff.held >= LEASED_IN_HAND_MAX) return null;
  return handoff.leaseMs;
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
  const row = { ...event, id: randomUUID(), time: new Date(), trace_context: activeTraceparent() };
  eventRecorded(trx, await insertEvent(trx, row, deliveryLease(trx, event.type)));
}

/**
 * An event and its deliveries were written by a statement on `db` (recordEventWith): counts it
 * for the event stream, and hands the deliveries to the dispatcher once they are there to be
 * claimed, at once after a statement outside any transaction or when `db`'s transaction
 * commits (a claim by id before the commit finds nothing, and a leased delivery sent before it
 * would announce an event that may yet roll back).
 */
export function eventRecorded(db: Db, deliveries: NewDeliveries): void {
  recorded++;
  if (deliveries.ids.length === 0 && deliveries.leased.length === 0) return;
  const database = databaseOf(db);
  const handoff = database === undefined ? undefined : handoffs.get(database);
  if (handoff === undefined) return; // no dispatcher of this process: its own scan finds them
  const handOver = () => {
    handoff.count++;
    const { ids, leased } = deliveries;
    if (handoff.leaseMs !== undefined) {
      // Only while a dispatcher runs: else nothing would take them (its scan finds them anyway).
      if (handoff.ids.length + ids.length > HANDOFF_MAX) handoff.ids = handoff.ids.slice(ids.length);
      handoff.ids.push(...ids);
    }
    const at = performance.now();
    for (const delivery of leased) handoff.leased.push({ delivery, at });
  };
  if (db.isTransaction) afterCommit(db as Transaction<Database>, handOver);
  else handOver();
}

/** `{"id": <id>}`: the data of `*.deleted` and `user.password_changed` (docs/webhooks.md). */
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
