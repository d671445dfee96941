// Hot queries compiled once at start-up instead of on every request. Kysely builds and
// compiles a query's tree each time it runs; for the primary-key reads every request makes,
// that was a measurable share of the request's CPU (see README, Benchmark). A prepared query
// is built once with placeholder arguments; running it only swaps the values in.
import { CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { Database, Db } from './database.js';

/** Runs one statement outside any transaction, straight on the driver. */
export type DirectRun = (sql: string, parameters: readonly unknown[]) => Promise<{ rows: unknown[] }>;

const directRuns = new WeakMap<object, DirectRun>();

/**
 * Lets prepared queries on `db` itself (not on its transactions) skip Kysely's executor: a
 * prepared query is already compiled, and acquiring and releasing a Kysely connection per
 * statement costs several promises on every request (docs/benchmark.md). Queries inside a
 * transaction still go through Kysely, on the transaction's connection.
 */
export function withDirectRun<T extends object>(db: T, run: DirectRun): T {
  directRuns.set(db, run);
  return db;
}

/**
 * Compiles `build(db, ...placeholders)` once. The placeholders must reach the query only as
 * bound values (where, limit…), never as SQL text, which Kysely guarantees for values.
 */
export function prepare<R, A extends unknown[]>(
  arity: A['length'],
  build: (db: Kysely<Database>, ...args: A) => Compilable<R>,
): (db: Db, ...args: A) => Promise<R[]> {
  let template: { sql: string; slots: (number | { value: unknown })[] } | undefined;
  return async (db, ...args) => {
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
    const direct = directRuns.get(db);
    if (direct !== undefined) return (await direct(template.sql, parameters)).rows as R[];
    const result = await db.executeQuery<R>(CompiledQuery.raw(template.sql, parameters));
    return result.rows;
  };
}

/** One prepared query per variant key (a sort order, a set of filters), made on first use. */
export function prepareVariants<K extends string, R, A extends unknown[]>(
  arity: A['length'],
  build: (key: K) => (db: Kysely<Database>, ...args: A) => Compilable<R>,
): (key: K, db: Db, ...args: A) => Promise<R[]> {
  const variants = new Map<K, (db: Db, ...args: A) => Promise<R[]>>();
  return (key, db, ...args) => {
    let run = variants.get(key);
    if (run === undefined) {
      run = prepare<R, A>(arity, build(key));
      variants.set(key, run);
    }
    return run(db, ...args);
  };
}
