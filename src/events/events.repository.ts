// SQL for the outbox.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { EventsTable } from './events.table.js';
import type { Insertable, RawBuilder, Selectable } from 'kysely';
import type { EventType } from './event-types.js';

export type EventRow = Selectable<EventsTable>;

/**
 * A delivery handed to the dispatcher of the process that wrote it, already leased to it: what
 * sending it needs, as a claim returns it (webhooks/deliveries.repository.ts).
 */
export interface LeasedDelivery {
  id: number;
  subscription_id: number;
  attempts: number;
  /** The lease's fencing token (migration 0020): the outcome is recorded under it. */
  fencing_token: number;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  event_id: string;
  event_type: EventType;
  subject: string;
  time: Date;
  data: string;
  /** The `traceparent` of the request that wrote the event (tracing on and sampled), else null. */
  trace_context: string | null;
}

/** A new event's deliveries: the ids of those to claim, and those leased to this process at insert. */
export interface NewDeliveries {
  ids: number[];
  leased: LeasedDelivery[];
}

/**
 * The outbox's fan-out, as a statement for a WITH item: one webhook delivery for every enabled
 * subscription that wants the type of the event in `events` (a WITH item returning `sequence`,
 * `type`, `subject`): exactly, by `user.*` / `order.*`, or `*` (docs/webhooks.md).
 *
 * With `leaseMs` (given for the event that creates its subject: nothing earlier of that subject
 * can be waiting, so the order rule holds without a look), each delivery is inserted already
 * claimed by the writing process for that long, as the dispatcher's claim would (`attempts` 1,
 * leased), so that its dispatcher sends it after the commit without a claim statement; a killed
 * instance's lease lapses like a claimed one's. (A look for earlier deliveries of the subject in
 * this statement, so as to lease later events too, was tried: in `npm run bench -- --webhooks`
 * a subscription then cost PostgreSQL +520–690 µs an order, against none of that for a server
 * started afterwards on the same grown table: a plan made while the table was small.)
 */
function fanOut(events: string, leaseMs: number | null): RawBuilder<unknown> {
  return sql`
    insert into webhook_deliveries (subscription_id, event_sequence, subject, attempts, fencing_token, leased_until,
                                    last_attempt_at)
    select s.id, e.sequence, e.subject, (${leaseMs}::integer is not null)::int, (${leaseMs}::integer is not null)::int,
           now() + ${leaseMs}::integer * interval '1 millisecond',
           case when ${leaseMs}::integer is not null then now() end
      from ${sql.table(events)} e join webhook_subscriptions s
        on s.enabled and s.events && array[e.type, split_part(e.type, '.', 1) || '.*', '*']
    returning id, subscription_id, event_sequence, leased_until is not null as leased`;
}

/**
 * The deliveries of the WITH items `deliveries` (a fan-out) and `event` as one JSON text (null
 * when there are none): the id of each, or the whole of those leased at insert.
 */
function handedOver(deliveries: string, event: string): RawBuilder<string | null> {
  return sql<string | null>`(
    select json_agg(case when d.leased then json_build_object(
             'id', d.id, 'subscription_id', d.subscription_id, 'url', s.url, 'secret', s.secret,
             'previous_secret', s.previous_secret, 'previous_secret_expires_at', s.previous_secret_expires_at,
             'event_id', e.id, 'event_type', e.type, 'subject', e.subject, 'time', e.time, 'data', e.data,
             'trace_context', e.trace_context)
           else to_json(d.id) end)::text
      from ${sql.table(deliveries)} d
      join ${sql.table(event)} e on e.sequence = d.event_sequence
      join webhook_subscriptions s on s.id = d.subscription_id)`;
}

type HandedOver =
  | number
  | (Omit<LeasedDelivery, 'attempts' | 'fencing_token' | 'time' | 'previous_secret_expires_at'> & {
      time: string;
      previous_secret_expires_at: string | null;
    });

/** Reads `handedOver`'s JSON text. */
export function newDeliveries(text: string | null): NewDeliveries {
  const ids: number[] = [];
  const leased: LeasedDelivery[] = [];
  for (const d of text === null ? [] : (JSON.parse(text) as HandedOver[])) {
    if (typeof d === 'number') ids.push(d);
    else
      leased.push({
        ...d,
        attempts: 1,
        fencing_token: 1,
        time: new Date(d.time),
        previous_secret_expires_at:
          d.previous_secret_expires_at === null ? null : new Date(d.previous_secret_expires_at),
      });
  }
  return { ids, leased };
}

/**
 * Inserts the event and, in the same statement, its deliveries (the fan-out): committed with the
 * change or not at all (docs/webhooks.md). `leaseMs`: see fanOut.
 */
export async function insertEvent(
  db: Db,
  row: Insertable<EventsTable>,
  leaseMs: number | null,
): Promise<NewDeliveries> {
  const { rows } = await sql<{ deliveries: string | null }>`
    with e as (
      insert into events (id, type, subject, time, data, owner, trace_context)
      values (${row.id}, ${row.type}, ${row.subject}, ${row.time}, ${row.data}, ${row.owner}, ${row.trace_context ?? null})
      returning sequence, id, type, subject, time, data, trace_context
    ),
    d as (${fanOut('e', leaseMs)})
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
  /** See fanOut. */
  leaseMs: number | null;
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
    recorded_deliveries as (${fanOut('recorded_event', event.leaseMs)})`;
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
