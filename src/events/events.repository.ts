// SQL for the outbox.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { EventsTable } from './events.table.js';
import type { Insertable, RawBuilder, Selectable } from 'kysely';
import type { EventType } from './event-types.js';
import { fanOut, handedOver, newDeliveries, type FanOut, type NewDeliveries } from './fan-out.repository.js';

export type EventRow = Selectable<EventsTable>;

/**
 * Inserts the event and, in the same statement, its deliveries (the fan-out): committed with the
 * change or not at all (docs/webhooks.md).
 */
export async function insertEvent(db: Db, row: Insertable<EventsTable>, fan: FanOut): Promise<NewDeliveries> {
  const { rows } = await sql<{ deliveries: string | null }>`
    with e as (
      insert into events (id, type, subject, time, data, owner, trace_context)
      values (${row.id}, ${row.type}, ${row.subject}, ${row.time}, ${row.data}, ${row.owner}, ${row.trace_context ?? null})
      returning sequence, id, type, subject, time, data, trace_context
    ),
    d as (${fanOut('e', fan)})
    select ${handedOver('d', 'e')} as deliveries`.execute(db);
  return newDeliveries(rows[0]?.deliveries ?? null);
}

/** An event whose subject, data and owner come from a row of another WITH item. */
export interface EventOfRow {
  /** Each row's event id (a uuid column of `source`): one event per row. */
  id: RawBuilder<string>;
  type: EventType;
  time: Date;
  subject: RawBuilder<string>;
  data: RawBuilder<string>;
  owner: RawBuilder<number>;
  /** Each row's `traceparent`, or null (see EventsTable.trace_context). */
  traceContext: RawBuilder<string | null>;
  /** How its deliveries are made (handoff.ts, fanOutFor). */
  fanOut: FanOut;
}

/**
 * Two WITH items for a statement that changes a row and records its event in one round trip:
 * `recorded_event` inserts `event` for each row of `source` (none when it has none), and
 * `recorded_deliveries` fans it out; `recordedDeliveries` selects them for newDeliveries.
 */
export function recordEventWith(source: string, event: EventOfRow): RawBuilder<unknown> {
  return sql`
    recorded_event as (
      insert into events (id, type, subject, time, data, owner, trace_context)
      select ${event.id}::uuid, ${event.type}::text, ${event.subject}, ${event.time}::timestamptz, ${event.data},
             ${event.owner}, ${event.traceContext}
        from ${sql.table(source)}
      returning sequence, id, type, subject, time, data, trace_context
    ),
    recorded_deliveries as (${fanOut('recorded_event', event.fanOut)})`;
}

/** recordEventWith's deliveries as JSON text, for newDeliveries. */
export const recordedDeliveries = (): RawBuilder<string | null> => handedOver('recorded_deliveries', 'recorded_event');

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

/** A place in the event stream's order: `(tx, sequence)`, the writing transaction first. */
export interface StreamPosition {
  tx: bigint;
  sequence: bigint;
}

export interface StreamRow {
  sequence: number;
  tx: bigint;
  id: string;
  type: EventRow['type'];
  subject: string;
  time: Date;
  data: string;
  owner: number | null;
}

export interface StreamPage {
  /** In `(tx, sequence)` order, after `after`, at most `limit`. */
  rows: StreamRow[];
  /** The oldest transaction still open when read: every row below it has been seen. */
  horizon: bigint;
}

/** A row of readStream's statement: the horizon, and an event unless there was none. */
type RawStreamRow = { horizon: string } & ({ sequence: null } | (Omit<StreamRow, 'tx'> & { tx: string }));

/**
 * The events after `after` (and up to `until`, when given) in `(tx, sequence)` order, and only
 * those written by transactions older than the oldest one still open: every transaction below
 * that horizon has ended, so no row can appear there later and a reader that has passed a
 * position never misses one (ordering by sequence alone would: a transaction may take its
 * sequence early and commit late). One statement; the horizon comes back even with no rows.
 */
export async function readStream(
  db: Db,
  after: StreamPosition,
  until: StreamPosition | undefined,
  limit: number,
  /** Only this user's events (a stream catching up for a caller without admin). */
  owner?: number | null,
): Promise<StreamPage> {
  const ofOwner = owner === undefined ? sql`` : sql`and e.owner = ${owner}`;
  const upTo =
    until === undefined
      ? sql``
      : sql`and (e.tx, e.sequence) <= (${String(until.tx)}::text::xid8, ${String(until.sequence)}::bigint)`;
  const { rows } = await sql<RawStreamRow>`
    with h as (select pg_snapshot_xmin(pg_current_snapshot()) as x)
    select h.x::text as horizon, p.sequence, p.tx::text as tx, p.id, p.type, p.subject, p.time, p.data, p.owner
      from h left join lateral (
        select e.sequence, e.tx, e.id, e.type, e.subject, e.time, e.data, e.owner
          from events e
         where (e.tx, e.sequence) > (${String(after.tx)}::text::xid8, ${String(after.sequence)}::bigint)
           and e.tx < h.x
           ${upTo}
           ${ofOwner}
         order by e.tx, e.sequence
         limit ${limit}
      ) p on true
     order by p.tx, p.sequence`.execute(db);
  const page: StreamPage = { rows: [], horizon: BigInt(rows[0]?.horizon ?? '0') };
  for (const row of rows) {
    if (row.sequence === null) continue;
    const { sequence, tx, id, type, subject, time, data, owner } = row;
    page.rows.push({ sequence, tx: BigInt(tx), id, type, subject, time, data, owner });
  }
  return page;
}

/** The transactions in progress now, as `xmin:xmax:xip,…` (pg_current_snapshot). */
export async function currentSnapshot(db: Db): Promise<string> {
  const { rows } = await sql<{ s: string }>`select pg_current_snapshot()::text as s`.execute(db);
  const [row] = rows;
  if (row === undefined) throw new Error('pg_current_snapshot() returned no row');
  return row.s;
}

/** Where the event `sequence` stands in the stream's order; undefined when it is not kept. */
export async function streamPositionOf(db: Db, sequence: number): Promise<StreamPosition | undefined> {
  const { rows } = await sql<{ tx: string }>`select tx::text as tx from events where sequence = ${sequence}`.execute(
    db,
  );
  const row = rows[0];
  return row === undefined ? undefined : { tx: BigInt(row.tx), sequence: BigInt(sequence) };
}
