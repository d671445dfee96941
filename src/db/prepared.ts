// Hot queries compiled once at start-up instead of on every request. Kysely builds and
// compiles a query's tree each time it runs, a share of the request's CPU for the primary-key
// reads every request makes (docs/benchmark.md). A prepared query is built once with
// placeholder arguments; running it only swaps the values in. Reads by id gathered into one
// statement: prepared-by-id.ts.
import { CompiledQuery, type Compilable, type Kysely, type RawBuilder } from 'kysely';
import type { Span } from '@opentelemetry/api';
import { adoptQuery, untraced } from '../tracing/db-spans.js';
import type { Database, Db } from './database.js';

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

/** What a database made by create-database.ts reaches beneath Kysely. */
export interface DirectDatabase {
  /** One statement on the driver, outside any transaction. */
  run: DirectRun;
  /** One statement on each of its connections (warmUp). */
  everyConnection: EveryConnectionRun;
  /** How many connections it holds. */
  connections: number;
  /** DATABASE_QUEUE_TIMEOUT_MS (1000 when absent). */
  queueTimeoutMs?: number | undefined;
  /** A read replica's: one statement on its primary (a gathered read that waited too long there). */
  onPrimary?: DirectRun | undefined;
  /** Counts a statement refused for its wait outside the pool (a gathered read) with the pool's. */
  queueTimedOut?: (() => void) | undefined;
}

const directs = new WeakMap<object, DirectDatabase>();
/** The statements warmUp runs, from every `prepare` given warm-up arguments. */
const warmUps: ((db: Db) => Statement)[] = [];

/**
 * Lets prepared queries on `db` itself (not on its transactions) skip Kysely's executor: a
 * prepared query is already compiled, and acquiring and releasing a Kysely connection per
 * statement costs several promises on every request (docs/benchmark-log.md). Queries inside a
 * transaction still go through Kysely, on the transaction's connection.
 */
export function withDirectRun<T extends object>(db: T, direct: DirectDatabase): T {
  directs.set(db, direct);
  return db;
}

/** What `db` reaches beneath Kysely (undefined for a transaction, or a database not made by withDirectRun). */
export function directOf(db: Db): DirectDatabase | undefined {
  return directs.get(db);
}

/**
 * How long work may wait for the database before it is refused (DATABASE_QUEUE_TIMEOUT_MS; 1000
 * for a database not made with one): an order waiting for its batch, a statement for a connection.
 */
export function queueTimeoutOf(db: Db): number {
  return directs.get(db)?.queueTimeoutMs ?? 1000;
}

/** How many connections `db` holds (1 for a transaction, or a database not made by withDirectRun). */
export function connectionCount(db: Db): number {
  return directs.get(db)?.connections ?? 1;
}

/** Runs `sql` once on each connection of `db`, together; each connection's rows, in pool order. */
export function onEveryConnection(db: Db, sql: string, parameters: readonly unknown[] = []): Promise<unknown[][]> {
  const every = directs.get(db)?.everyConnection;
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
    const direct = directs.get(db)?.run;
    if (direct !== undefined) return direct(sql, parameters, options) as Promise<R[]>;
    // A sampled request's handle (tracedDb): the base's driver, beneath the request's span.
    const made = untraced(db);
    const baseDirect = made === undefined ? undefined : directs.get(made.base)?.run;
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

// ---- warm-up ---------------------------------------------------------------------------------

/** Past PostgreSQL's five custom plans of a prepared statement: the sixth run has its plan. */
const WARM_UP_RUNS = 6;

/**
 * Runs each hot statement (every `prepare` given `warmUp` arguments) on every connection, before
 * the service takes traffic; returns their texts. A PostgreSQL backend's first run of a
 * statement loads the catalog entries of every table, index and trigger it touches, postgres.js
 * parses it on that connection, and PostgreSQL plans its first five runs there with their values
 * before it settles on a plan: a new instance's first wave of orders, spread over every
 * connection, would pay all of that at once (`npm run bench -- --first-wave`; the figures are in
 * docs/benchmark-log.md). The warm-up arguments name no row (id 0): the statements read nothing
 * and write nothing. Each runs WARM_UP_RUNS times on each connection.
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
