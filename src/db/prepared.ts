// Hot queries compiled once at start-up instead of on every request. Kysely builds and
// compiles a query's tree each time it runs; for the primary-key reads every request makes,
// that was a measurable share of the request's CPU (docs/benchmark.md). A prepared query
// is built once with placeholder arguments; running it only swaps the values in.
import { CompiledQuery, sql, type Compilable, type Kysely, type RawBuilder } from 'kysely';
import type { Span } from '@opentelemetry/api';
import { adoptQuery, gatheredRead, traceGathered, untraced, type GatheredRead } from '../tracing/db-spans.js';
import { Batcher } from './batcher.js';
import type { Database, Db } from './database.js';
import { Overloaded } from '../errors.js';

/**
 * How a statement outside any transaction is sent. `spread`: a write that locks rows and costs
 * far more than a primary-key read (placing an order) goes to the least loaded connection
 * instead of joining the reads' pipeline (postgres-pool.ts).
 */
export interface RunOptions {
  spread?: boolean;
  /**
   * Safe to send again after the connection was lost under it (a read by key, a count): it
   * changes nothing. A statement not so declared is never sent twice (postgres-pool.ts).
   */
  repeatable?: boolean;
  /** The span the statement is traced beneath (a sampled request's; tracing/db-spans.ts). */
  parent?: Span;
}

/** Runs one statement outside any transaction, straight on the driver. */
export type DirectRun = (sql: string, parameters: readonly unknown[], options?: RunOptions) => Promise<unknown[]>;

/** Runs one statement once on each of the database's connections, together: each one's rows. */
export type EveryConnectionRun = (sql: string, parameters: readonly unknown[]) => Promise<unknown[][]>;

const directRuns = new WeakMap<object, DirectRun>();
const everyConnectionRuns = new WeakMap<object, EveryConnectionRun>();
const connectionCounts = new WeakMap<object, number>();
const queueTimeouts = new WeakMap<object, number>();
/** The statements warmUp runs, from every `prepare` given warm-up arguments. */
const warmUps: ((db: Db) => Statement)[] = [];

/**
 * Lets prepared queries on `db` itself (not on its transactions) skip Kysely's executor: a
 * prepared query is already compiled, and acquiring and releasing a Kysely connection per
 * statement costs several promises on every request (docs/benchmark-log.md). Queries inside a
 * transaction still go through Kysely, on the transaction's connection. `everyConnection`
 * reaches each connection of the pool (warmUp), of which there are `connections`.
 */
export function withDirectRun<T extends object>(
  db: T,
  run: DirectRun,
  everyConnection: EveryConnectionRun,
  connections: number,
  queueTimeoutMs?: number,
): T {
  directRuns.set(db, run);
  everyConnectionRuns.set(db, everyConnection);
  connectionCounts.set(db, connections);
  if (queueTimeoutMs !== undefined) queueTimeouts.set(db, queueTimeoutMs);
  return db;
}

/**
 * How long work may wait for the database before it is refused (DATABASE_QUEUE_TIMEOUT_MS; 1000
 * for a database not made with one): an order waiting for its batch, a statement for a connection.
 */
export function queueTimeoutOf(db: Db): number {
  return queueTimeouts.get(db) ?? 1000;
}

/** How many connections `db` holds (1 for a transaction, or a database not made by withDirectRun). */
export function connectionCount(db: Db): number {
  return connectionCounts.get(db) ?? 1;
}

/** Runs `sql` once on each connection of `db`, together; each connection's rows, in pool order. */
export function onEveryConnection(db: Db, sql: string, parameters: readonly unknown[] = []): Promise<unknown[][]> {
  const every = everyConnectionRuns.get(db);
  if (every === undefined) throw new Error('this database reaches no connection directly (withDirectRun)');
  return every(sql, parameters);
}

/** A statement and its bound values, as a prepared query sends them (EXPLAIN in tests). */
export interface Statement {
  sql: string;
  parameters: unknown[];
}

/** A prepared query: run it, or see the statement it would send. */
export interface Prepared<R, A extends unknown[]> {
  (db: Db, ...args: A): Promise<R[]>;
  statement(db: Db, ...args: A): Statement;
}

/**
 * Compiles `build(db, ...placeholders)` once. The placeholders must reach the query only as
 * bound values (where, limit…), never as SQL text, which Kysely guarantees for values.
 */
export function prepare<R, A extends unknown[]>(
  arity: A['length'],
  build: (db: Kysely<Database>, ...args: A) => Compilable<R>,
  options: RunOptions & { warmUp?: A } = {},
): Prepared<R, A> {
  let template: { sql: string; slots: (number | { value: unknown })[] } | undefined;
  const statement = (db: Db, ...args: A): Statement => {
    if (template === undefined) {
      const placeholders = Array.from({ length: arity }, (_, i) => `\u0000prepared-arg-${i}\u0000`);
      const compiled = build(db, ...(placeholders as unknown as A)).compile();
      template = {
        sql: compiled.sql,
        slots: compiled.parameters.map((p) => {
          const i = placeholders.indexOf(p as string);
          return i === -1 ? { value: p } : i;
        }),
      };
    }
    const parameters = template.slots.map((slot) => (typeof slot === 'number' ? args[slot] : slot.value));
    return { sql: template.sql, parameters };
  };
  const run = (db: Db, ...args: A): Promise<R[]> => {
    const { sql, parameters } = statement(db, ...args);
    const direct = directRuns.get(db);
    if (direct !== undefined) return direct(sql, parameters, options) as Promise<R[]>;
    // A sampled request's handle (tracedDb): the base's driver, beneath the request's span.
    const made = untraced(db);
    const baseDirect = made === undefined ? undefined : directRuns.get(made.base);
    if (made !== undefined && baseDirect !== undefined)
      return baseDirect(sql, parameters, { ...options, parent: made.span }) as Promise<R[]>;
    const compiled = CompiledQuery.raw(sql, parameters);
    adoptQuery(db, compiled.queryId);
    return db.executeQuery<R>(compiled).then((result) => result.rows);
  };
  const { warmUp: warmUpArgs } = options;
  if (warmUpArgs !== undefined) warmUps.push((db) => statement(db, ...warmUpArgs));
  return Object.assign(run, { statement });
}

// ---- primary-key reads gathered --------------------------------------------------------------

/** How a database's primary-key reads are gathered (gatherReads); absent: each read alone. */
export type Gathering = 'pooled' | 'direct';
const gathering = new WeakMap<object, Gathering>();

/**
 * Gathers `db`'s primary-key reads (prepareById) into one statement per moment. Most of a
 * primary-key read's cost, in the service and in PostgreSQL, is its statement's (parse of the
 * answer, executor start-up, one protocol round), not its row's: forty reads of one moment as one
 * `= any(…)` cost little more than one (docs/architecture.md, "Reads gathered").
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
 * Gathered statements out at once, per read and database: reads gather while they run. On a
 * direct connection one: a read that finds a statement of its kind out waits for it to come
 * back and goes with the others that came meanwhile, so that under load the statements are fewer
 * and fuller (the service's CPU a read 0.91–0.94× of four out for GET by id, 0.93–0.99× for the
 * 304 read, `npm run bench -- --side-by-side`; docs/benchmark-log.md, "one gathered statement
 * out, not four"); the wait is at most one
 * statement's round trip. Behind a pooler, where each statement is a transaction of its own,
 * four, as measured there.
 */
const GATHERED_IN_FLIGHT = { direct: 1, pooled: 4 } as const;

/**
 * A primary-key read (`one`) that, on a database whose reads are gathered (gatherReads), runs as
 * `many` for the ids asked in the same moment: one statement, each caller its own row (or none:
 * its 404), a failure only the failure of the reads it carried. A read that waited longer than
 * the pool's queue time-out for its statement is not sent (503, as a statement that waited for a
 * connection). A sampled request's read joins too (its spans: traceGathered); in a transaction it is `one`.
 */
export function prepareById<R extends { id: number }>(
  one: Prepared<R, [number]>,
  many: Prepared<R, [string]>,
): Prepared<R, [number]>;
/** The same for rows whose key is another column (`keyOf`): stock, by its product's id. */
export function prepareById<R>(
  one: Prepared<R, [number]>,
  many: Prepared<R, [string]>,
  keyOf: (row: R) => number,
): Prepared<R, [number]>;
export function prepareById<R>(
  one: Prepared<R, [number]>,
  many: Prepared<R, [string]>,
  keyOf: (row: R) => number = (row) => (row as { id: number }).id,
): Prepared<R, [number]> {
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
          immediate: direct,
          maxWaitMs: queueTimeoutOf(db),
          expired: () => new Overloaded('queue'),
        },
      );
      batchers.set(db, batcher);
    }
    return batcher;
  };
  const run = (db: Db, id: number): Promise<R[]> => {
    const how = gathering.get(db);
    if (how === undefined) {
      // A sampled request's handle (tracedDb): its read joins the gathered statement of its
      // moment like any other (sent apart, sampled reads cost the driver ~12 µs each under load:
      // docs/tracing.md); the statement's spans: traceGathered. Alone, its statement is traced
      // as every statement is.
      const made = untraced(db);
      const baseHow = made === undefined ? undefined : gathering.get(made.base);
      if (made === undefined || baseHow === undefined) return one(db, id);
      const batcher = batcherOf(made.base, baseHow);
      return batcher.alone(() => one(db, id)) ?? batcher.call(gatheredRead(id, made.span));
    }
    const batcher = batcherOf(db, how);
    return batcher.alone(() => one(db, id)) ?? batcher.call(id);
  };
  return Object.assign(run, { statement: (db: Db, id: number) => one.statement(db, id) });
}

// ---- warm-up ---------------------------------------------------------------------------------

/** Past PostgreSQL's five custom plans of a prepared statement: the sixth run has its plan. */
const WARM_UP_RUNS = 6;

/**
 * Runs each hot statement (every `prepare` given `warmUp` arguments) on every connection, before
 * the service takes traffic; returns their texts. A PostgreSQL backend's first run of a
 * statement loads the catalog entries of every table, index and trigger it touches (placing an
 * order: ~24 ms here), postgres.js parses it on that connection, and PostgreSQL plans its first
 * five runs there with their values before it settles on a plan. A new instance's first wave of
 * orders, spread over every connection, paid all of that at once: a p99 of 204–461 ms in its
 * first second, 53–76 ms with the warm-up (`npm run bench -- --first-wave`). The warm-up arguments name no row (id 0):
 * the statements read nothing and write nothing. Each runs WARM_UP_RUNS times on each connection.
 */
export async function warmUp(db: Db): Promise<string[]> {
  const statements = warmUps.map((make) => make(db));
  for (let i = 0; i < WARM_UP_RUNS; i++) {
    for (const { sql, parameters } of statements) await onEveryConnection(db, sql, parameters);
  }
  return statements.map(({ sql }) => sql);
}

/** Prepared queries, one per variant key (a sort order, a set of filters), made on first use. */
export interface PreparedVariants<K extends string, R, A extends unknown[]> {
  (key: K, db: Db, ...args: A): Promise<R[]>;
  statement(key: K, db: Db, ...args: A): Statement;
}

/** One prepared query per variant key (a sort order, a set of filters), made on first use. */
export function prepareVariants<K extends string, R, A extends unknown[]>(
  arity: A['length'],
  build: (key: K) => (db: Kysely<Database>, ...args: A) => Compilable<R>,
  options: RunOptions = {},
): PreparedVariants<K, R, A> {
  const variants = new Map<K, Prepared<R, A>>();
  const variant = (key: K) => {
    let prepared = variants.get(key);
    if (prepared === undefined) {
      prepared = prepare<R, A>(arity, build(key), options);
      variants.set(key, prepared);
    }
    return prepared;
  };
  const run = (key: K, db: Db, ...args: A) => variant(key)(db, ...args);
  return Object.assign(run, { statement: (key: K, db: Db, ...args: A) => variant(key).statement(db, ...args) });
}

/** A raw SQL statement as something `prepare` can compile. */
export function compilable<R>(db: Kysely<Database>, statement: RawBuilder<unknown>): Compilable<R> {
  return { compile: () => statement.compile(db) };
}
