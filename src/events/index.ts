// Events (docs/webhooks.md). What other resources use: recordEvent, inside the transaction of the
// change it reports, so that the change and its event commit together or not at all.
//
// An event is fanned out to its subscriptions' deliveries in the statement that writes it
// (fan-out.repository.ts), and the new deliveries are handed to this process's dispatcher once
// committed (handoff.ts). webhooks/ sends them: it reads the hand-off (deliveryHandoff) and the
// leased deliveries from here; events/ imports nothing of webhooks/.
import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { spanOfDb } from '../tracing/db-spans.js';
import { traceparentOf } from '../tracing/tracing.js';
import type { EventType } from './event-types.js';
import { fanOutFor, handOver } from './handoff.js';
import type { NewDeliveries } from './fan-out.repository.js';
import { insertEvent, type EventRow } from './events.repository.js';
// For a statement that writes its events itself (placing orders): the WITH items that insert
// them (recordEventWith, whose `fanOut` is eventFanOut's), the deliveries it selects
// (deliveriesOfStatement), read back with writtenDeliveries; a fan-out travels as one bound
// value of the prepared statement (fanOutArgument, fanOutFromArgument).
export { recordEventWith, recordedDeliveries as deliveriesOfStatement, type EventOfRow } from './events.repository.js';
export { fanOutArgument, fanOutFromArgument, newDeliveries as writtenDeliveries } from './fan-out.repository.js';
export type { FanOut, LeasedDelivery, NewDeliveries } from './fan-out.repository.js';
export { deliveryHandoff, fanOutFor as eventFanOut, type DeliveryHandoff } from './handoff.js';

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

/**
 * How many events this process has written: the event stream compares it after a request to
 * know whether to read new events at once (events/stream.ts).
 */
export function eventsRecorded(): number {
  return recorded;
}

/** Writes the event in the transaction of the change it reports (a service's `transact`). */
export async function recordEvent(trx: Transaction<Database>, event: NewEvent): Promise<void> {
  const row = { ...event, id: randomUUID(), time: new Date(), trace_context: traceparentOf(spanOfDb(trx)) };
  eventsWritten(trx, await insertEvent(trx, row, fanOutFor(trx, event.type)));
}

/**
 * Events and their deliveries were written by a statement on `db` (recordEvent, recordEventWith):
 * counts them for the event stream, and hands the deliveries to this process's dispatcher once
 * they can be claimed (webhooks/index.ts, handOver).
 */
export function eventsWritten(db: Db, deliveries: NewDeliveries): void {
  recorded++;
  handOver(db, deliveries);
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
