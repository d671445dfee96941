// The hand-off between the writes of this process and its dispatcher: which new deliveries to
// claim by id, which were leased to it at insert, and whether new ones should be. A write's
// deliveries are handed over only once its transaction has committed.
import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { afterCommit, databaseOf } from '../db/transact.js';
import type { EventType } from './event-types.js';
import type { FanOut, LeasedDelivery, NewDeliveries } from './fan-out.repository.js';

const NOT_LEASED: FanOut = Object.freeze({ leaseMs: null });

/** At most this many ids wait for a dispatcher; older ones are left to its scan. */
const HANDOFF_MAX = 10_000;
/** Deliveries are leased at insert only while fewer than this many leased ones wait in hand. */
const LEASED_IN_HAND_MAX = 1_000;

/**
 * What this process's writes hand to the dispatcher of one database (dispatcher.ts),
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
 * How the deliveries of an event of `type` written now on `db` are inserted (fan-out.repository.ts):
 * leased at insert to this process's dispatcher, or not. Only an event that creates its subject is leased at insert: nothing earlier of that
 * subject can be waiting, so no look is needed for the order rule; a later event is claimed by
 * its dispatcher once its subject's earlier deliveries are done. None either when no
 * dispatcher of this process serves the database, or when that one already has enough in hand.
 */
export function fanOutFor(db: Db, type: EventType): FanOut {
  if (!type.endsWith('.created')) return NOT_LEASED;
  const database = databaseOf(db);
  const handoff = database === undefined ? undefined : handoffs.get(database);
  if (handoff?.leaseMs === undefined || handoff.leased.length + handoff.held >= LEASED_IN_HAND_MAX) return NOT_LEASED;
  return { leaseMs: handoff.leaseMs };
}

/**
 * An event's deliveries were written by a statement on `db`: hands them to the dispatcher once
 * they are there to be claimed, at once after a statement outside any transaction or when `db`'s transaction
 * commits (a claim by id before the commit finds nothing, and a leased delivery sent before it
 * would announce an event that may yet roll back).
 */
export function handOver(db: Db, deliveries: NewDeliveries): void {
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
