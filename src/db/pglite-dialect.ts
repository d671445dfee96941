// A Kysely dialect over PGlite. PGlite is one session, so a transaction must own it from BEGIN
// to COMMIT: every Kysely connection holds a mutex from acquire to release. A plain query holds
// it for one statement; a transaction holds it for its whole life, so no other request's
// statement can land inside it. Statements go through pglite-statements.ts: each text parsed
// once under a name, then one exchange with the engine per execution.
import { connectionSpans, traceStatement } from '../tracing/db-spans.js';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import { beginStatement, postgresDialect } from './postgres-dialect.js';
import type { PGlite } from '@electric-sql/pglite';
import type { DirectRun, EveryConnectionRun } from './prepared.js';
import { PGliteStatements } from './pglite-statements.js';

/**
 * `onClose` runs once the database is closed (it releases the DATA_DIR lock). `run` executes
 * one statement outside any transaction without Kysely's per-query connection bookkeeping
 * (the prepared hot queries use it; see prepared.ts).
 */
export function pgliteDialect(
  pglite: PGlite,
  onClose: () => void = () => {},
): { dialect: Dialect; run: DirectRun; everyConnection: EveryConnectionRun } {
  const driver = new PGliteDriver(pglite, onClose);
  return {
    dialect: postgresDialect(() => driver),
    run: (sql, parameters, options) => traceStatement(sql, () => driver.run(sql, parameters), options?.parent),
    // PGlite is one session: its only connection.
    everyConnection: async (sql, parameters) => [await driver.run(sql, parameters)],
  };
}

/** A FIFO mutex: callers get the lock in the order they asked for it. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();
  lock(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((resolve) => (release = resolve));
    const acquired = this.#tail.then(() => release);
    this.#tail = this.#tail.then(() => next);
    return acquired;
  }
}

class PGliteConnection implements DatabaseConnection {
  readonly #spans = connectionSpans();
  constructor(
    private readonly statements: PGliteStatements,
    readonly release: () => void,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.#spans.statement(
      query.sql,
      () => this.statements.query(query.sql, query.parameters),
      query.queryId,
    );
    // Kysely reads numAffectedRows only for mutations; PGlite reports it for every statement.
    return result.affectedRows === undefined
      ? { rows: result.rows as R[] }
      : { rows: result.rows as R[], numAffectedRows: BigInt(result.affectedRows) };
  }

  /** BEGIN, traced beneath the transaction's parent once its first statement names it. */
  async begin(statement: string): Promise<void> {
    await this.#spans.begin(statement, () => this.statements.query(statement, []));
  }

  async end(statement: 'commit' | 'rollback'): Promise<void> {
    await this.#spans.end(statement, () => this.statements.query(statement, []));
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('Streaming is not supported on the embedded engine');
  }
}

/** Kysely hands back the connection this driver acquired; anything else is a bug. */
function own(connection: DatabaseConnection): PGliteConnection {
  if (!(connection instanceof PGliteConnection)) throw new TypeError('Not a connection of this driver');
  return connection;
}

class PGliteDriver implements Driver {
  readonly #mutex = new Mutex();
  readonly #statements: PGliteStatements;
  constructor(
    private readonly pglite: PGlite,
    private readonly onClose: () => void,
  ) {
    this.#statements = new PGliteStatements(pglite);
  }
  async init(): Promise<void> {
    await this.pglite.waitReady;
  }
  async acquireConnection(): Promise<DatabaseConnection> {
    const release = await this.#mutex.lock();
    return new PGliteConnection(this.#statements, release);
  }
  async run(sql: string, parameters: readonly unknown[]): Promise<unknown[]> {
    const release = await this.#mutex.lock();
    try {
      return (await this.#statements.query(sql, parameters)).rows;
    } finally {
      release();
    }
  }
  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await own(connection).begin(beginStatement(settings));
  }
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await own(connection).end('commit');
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await own(connection).end('rollback');
  }
  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    if (connection instanceof PGliteConnection) connection.release();
  }
  async destroy(): Promise<void> {
    const release = await this.#mutex.lock(); // let queued statements finish first
    try {
      if (!this.pglite.closed) await this.pglite.close();
    } finally {
      this.onClose();
      release();
    }
  }
}
