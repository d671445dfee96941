// Primary-key reads gathered (docs/architecture.md, "Reads gathered"): a read by id that runs,
// on a database whose reads are gathered, as one statement for the ids asked in the same moment.
// Most of a primary-key read's cost, in the service and in PostgreSQL, is its statement's (parse
// of the answer, executor start-up, one protocol round), not its row's: forty reads of one moment
// as one `= any(…)` cost little more than one.
import { sql, type RawBuilder } from 'kysely';
import { gatheredRead, traceGathered, untraced, type GatheredRead } from '../tracing/db-spans.js';
import { Batcher } from './batcher.js';
import type { Db } from './database.js';
import { directOf, queueTimeoutOf, type Prepared, type Statement } from './prepared.js';
import { Overloaded } from '../errors.js';

/** How a database's primary-key reads are gathered (gatherReads); absent: each read alone. */
export type Gathering = 'pooled' | 'direct';
const gathering = new WeakMap<object, Gathering>();

/**
 * Gathers `db`'s primary-key reads (prepareById) into one statement per moment.
 *
 * - `pooled` (behind a pooler in transaction mode): each statement is its own transaction,
 *   passed on to a server connection one at a time; a read waits one event-loop turn, so that
 *   every read of that turn joins it.
 * - `direct`: a read that finds no statement of its kind out goes at once, alone, as the
 *   single-row statement (no added latency at low load); reads that come while it is out
 *   gather, and go together when it comes back (GATHERED_IN_FLIGHT).
 */
export function gatherReads(db: Db, how: Gathering): void {
  gathering.set(db, how);
}

/** `= any(ids)`, the operand of a read of several ids (prepareById's `many`). */
export function anyOf(ids: string): RawBuilder<number> {
  // One text parameter, as every array the service sends: the driver fetches no array types.
  return sql<number>`any(string_to_array(${ids}, ',')::bigint[])`;
}

/** Reads gathered at most into one statement. */
const GATHERED_MAX = 128;
/**
 * Gathered statements out at once, per kind of read and database. On a direct connection one: a
 * read that finds a statement of its kind out waits for it to come back and goes with the others
 * that came meanwhile, so that under load the statements are fewer and fuller (measured against
 * four: docs/benchmark-log.md, "one gathered statement out, not four"); the wait is one
 * statement's round trip, and at most DATABASE_QUEUE_TIMEOUT_MS whatever holds that statement
 * out. Behind a pooler, where each statement is a transaction of its own, four.
 */
const GATHERED_IN_FLIGHT = { direct: 1, pooled: 4 } as const;
/**
 * Reads of one kind waiting at most, per database: sixteen full statements. More could not be
 * sent within the queue time-out while the statements out are held; one more is refused at once.
 */
const GATHERED_WAITING_MAX = 16 * GATHERED_MAX;

/** Every gathering batcher of a database, whatever its kind of read (waitingReads). */
const batchersOf = new WeakMap<object, Batcher<unknown, unknown>[]>();

/** How many reads wait for a gathered statement on `db` (tests, docs). */
export function waitingReads(db: Db): number {
  let waiting = 0;
  for (const batcher of batchersOf.get(db) ?? []) waiting += batcher.waiting;
  return waiting;
}

/** A read by id: `gone` is true once the read's client has left (a waiting read is then dropped). */
export interface PreparedById<R> {
  (db: Db, id: number, gone?: () => boolean): Promise<R[]>;
  statement(db: Db, id: number): Statement;
}

/**
 * A primary-key read (`one`) that, on a database whose reads are gathered (gatherReads), runs as
 * `many` for the ids asked in the same moment: one statement, each caller its own row (or none:
 * its 404), a failure only the failure of the reads it carried. A read that waited longer than
 * the pool's queue time-out for its statement is not sent (503, as a statement that waited for a
 * connection), except on a read replica, where its primary answers it; a read whose client left
 * while it waited is not sent at all. A sampled request's read joins too (its spans:
 * traceGathered); in a transaction it is `one`.
 */
export function prepareById<R extends { id: number }>(
  one: Prepared<R, [number]>,
  many: Prepared<R, [string]>,
): PreparedById<R>;
/** The same for rows whose key is another column (`keyOf`): stock, by its product's id. */
export function prepareById<R>(
  one: Prepared<R, [number]>,
  many: Prepared<R, [string]>,
  keyOf: (row: R) => number,
): PreparedById<R>;
export function prepareById<R>(
  one: Prepared<R, [number]>,
  many: Prepared<R, [string]>,
  keyOf: (row: R) => number = (row) => (row as { id: number }).id,
): PreparedById<R> {
  // An ask is the id, or for a sampled request's read the id with its span (GatheredRead).
  type Ask = number | GatheredRead;
  const batchers = new WeakMap<object, Batcher<Ask, R[]>>();
  const batcherOf = (db: Db, how: Gathering): Batcher<Ask, R[]> => {
    let batcher = batchers.get(db);
    if (batcher === undefined) {
      const direct = how === 'direct';
      const send = async (ids: number[]): Promise<R[][]> => {
        if (direct && ids.length === 1) return [await one(db, ids[0] as number)];
        const rows = await many(db, [...new Set(ids)].join(','));
        const byId = new Map(rows.map((row) => [keyOf(row), row]));
        return ids.map((id) => {
          const row = byId.get(id);
          return row === undefined ? [] : [row];
        });
      };
      const database = directOf(db);
      const onPrimary = database?.onPrimary;
      batcher = new Batcher<Ask, R[]>(
        (asks) => {
          let sampled: GatheredRead[] | undefined;
          const ids = asks.map((ask) => {
            if (typeof ask === 'number') return ask;
            (sampled ??= []).push(ask);
            return ask.id;
          });
          return sampled === undefined ? send(ids) : traceGathered('SELECT', sampled, ids.length, () => send(ids));
        },
        {
          maxSize: GATHERED_MAX,
          maxInFlight: GATHERED_IN_FLIGHT[how],
          maxWaiting: GATHERED_WAITING_MAX,
          immediate: direct,
          maxWaitMs: queueTimeoutOf(db),
          expired: () => new Overloaded('queue'),
          onRefused: database?.queueTimedOut,
          // docs/operations.md, "Read replicas": a busy replica never causes a 503.
          late:
            onPrimary === undefined
              ? undefined
              : (ask) => {
                  const { sql: text, parameters } = one.statement(db, typeof ask === 'number' ? ask : ask.id);
                  const parent = typeof ask === 'number' ? {} : { parent: ask.parent };
                  return onPrimary(text, parameters, { repeatable: true, ...parent }) as Promise<R[]>;
                },
        },
      );
      batchers.set(db, batcher);
      const all = batchersOf.get(db);
      if (all === undefined) batchersOf.set(db, [batcher as Batcher<unknown, unknown>]);
      else all.push(batcher as Batcher<unknown, unknown>);
    }
    return batcher;
  };
  const run = (db: Db, id: number, gone?: () => boolean): Promise<R[]> => {
    const how = gathering.get(db);
    if (how === undefined) {
      // A sampled request's handle (tracedDb): its read joins the gathered statement of its
      // moment like any other (docs/tracing.md); the statement's spans: traceGathered. Alone,
      // its statement is traced as every statement is.
      const made = untraced(db);
      const baseHow = made === undefined ? undefined : gathering.get(made.base);
      if (made === undefined || baseHow === undefined) return one(db, id);
      const batcher = batcherOf(made.base, baseHow);
      return batcher.alone(() => one(db, id)) ?? batcher.call(gatheredRead(id, made.span), gone);
    }
    const batcher = batcherOf(db, how);
    return batcher.alone(() => one(db, id)) ?? batcher.call(id, gone);
  };
  return Object.assign(run, { statement: (db: Db, id: number) => one.statement(db, id) });
}
