// A Kysely dialect over our pool of postgres.js connections (postgres-pool.ts). Plain queries
// go through the shared connections, where postgres.js prepares and pipelines them; only a
// transaction reserves a connection, from BEGIN to COMMIT/ROLLBACK. Connection-level failures
// become DatabaseUnavailable (docs/api-guide.md#errors).
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
import type { PostgresPool, QueryOptions, Reservation } from './postgres-pool.js';
import type { DirectRun, EveryConnectionRun } from './prepared.js';
import { DatabaseUnavailable, Overloaded } from '../errors.js';
import { isConnectionError } from './pg-errors.js';

export interface PostgresJsDialectOptions {
  /**
   * Statements sent in the same simple query as each BEGIN: behind a pooler in transaction
   * mode, the session's time-outs as `set local` (a startup parameter or a session SET would be
   * refused, or leak to the next client of the server connection).
   */
  afterBegin?: string;
  /**
   * A read replica's primary: a statement the replica cannot answer runs there instead
   * (fallsBack), and a transaction the replica cannot begin begins there.
   */
  fallback?: PostgresPool;
}

/**
 * What a replica may fail with that the primary would not: it is down or gone (a connection
 * error), it accepts no writes (25006, among the connection errors), it cancelled a read for a
 * conflict with recovery (40001), or it is busy: the statement waited past the queue time-out
 * for one of its connections (docs/operations.md, "Read replicas": a replica never causes a 5xx).
 */
export function fallsBack(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return isConnectionError(error) || code === '40001' || code === 'QUEUE_TIMEOUT';
}

export function postgresJsDialect(
  pool: PostgresPool,
  options: PostgresJsDialectOptions = {},
): {
  dialect: Dialect;
  run: DirectRun;
  everyConnection: EveryConnectionRun;
  /** A replica's: one statement on its primary (a gathered read that waited too long for the replica). */
  onPrimary: DirectRun | undefined;
} {
  const { fallback } = options;
  return {
    dialect: postgresDialect(() => new PostgresJsDriver(pool, options.afterBegin, options.fallback)),
    // One statement on the shared connections, for the prepared hot queries (prepared.ts): on a
    // primary, untraced, the pool's own promise (its errors already translated).
    run:
      options.fallback === undefined
        ? (sql, parameters, runOptions) => {
            pool.hot(sql);
            if (runOptions?.parent === undefined) return pool.query(sql, parameters, runOptions);
            return traceStatement(sql, () => pool.query(sql, parameters, runOptions), runOptions.parent);
          }
        : (sql, parameters, runOptions) =>
            traceStatement(
              sql,
              () => queryWithFallback(pool, options.fallback, sql, parameters, runOptions),
              runOptions?.parent,
            ).catch((error: unknown) => {
              throw translate(error);
            }),
    onPrimary:
      fallback === undefined
        ? undefined
        : (sql, parameters, runOptions) =>
            traceStatement(sql, () => fallback.query(sql, parameters, runOptions), runOptions?.parent).catch(
              (error: unknown) => {
                throw translate(error);
              },
            ),
    // The warm-up's hot statements, once on each connection.
    everyConnection: (sql, parameters) => {
      pool.hot(sql);
      return pool.onEveryConnection(sql, parameters).then(
        (results) => results.map((rows) => [...rows]),
        (error: unknown) => {
          throw translate(error);
        },
      );
    },
  };
}

const MUTATIONS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

function queryWithFallback(
  pool: PostgresPool,
  fallback: PostgresPool | undefined,
  text: string,
  parameters: readonly unknown[],
  options?: QueryOptions,
) {
  const sent = pool.query(text, parameters, options);
  if (fallback === undefined) return sent;
  return sent.catch((error: unknown) => {
    if (!fallsBack(error)) throw error;
    return fallback.query(text, parameters, options);
  });
}

class PostgresJsConnection implements DatabaseConnection {
  #reserved: Reservation | undefined;
  readonly #spans = connectionSpans();

  constructor(
    private pool: PostgresPool,
    private readonly afterBegin: string | undefined,
    private readonly fallback: PostgresPool | undefined,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const result = await this.#spans.statement(
        query.sql,
        () =>
          this.#reserved === undefined
            ? queryWithFallback(this.pool, this.fallback, query.sql, query.parameters)
            : this.#onReserved(query.sql, query.parameters),
        query.queryId,
      );
      return MUTATIONS.has(result.command)
        ? { rows: [...result] as R[], numAffectedRows: BigInt(result.count) }
        : { rows: [...result] as R[] };
    } catch (error) {
      throw translate(error);
    }
  }

  // No cursors: a cursor's statement would bypass the pool's bookkeeping (never settled when its
  // connection ends), and the service reads every list a page at a time.
  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('Streaming is not supported: read a page at a time');
  }

  async begin(settings: TransactionSettings, retried = false): Promise<void> {
    try {
      this.#reserved = await this.pool.reserve();
    } catch (error) {
      // A replica that has no connection for it: the transaction runs on its primary.
      if (this.#fallBack(error)) return this.begin(settings, retried);
      throw translate(error);
    }
    const statement = beginStatement(settings);
    try {
      await this.#spans.begin(statement, () =>
        this.afterBegin === undefined
          ? this.#onReserved(statement, [])
          : this.#onReserved(`${statement}; ${this.afterBegin}`, [], true),
      );
    } catch (error) {
      this.#release();
      // A BEGIN lost with its connection changed nothing: once more, on another one.
      if (!retried && isConnectionError(error) && (error as { code?: unknown }).code !== '25006')
        return this.begin(settings, true);
      // A replica that cannot begin: the transaction runs on its primary.
      if (this.#fallBack(error)) return this.begin(settings, retried);
      throw translate(error);
    }
  }

  /** On a replica, after `error`, the primary takes over this connection's work: true if it did. */
  #fallBack(error: unknown): boolean {
    if (this.fallback === undefined || this.pool === this.fallback || !fallsBack(error)) return false;
    this.pool = this.fallback;
    return true;
  }

  async end(statement: 'commit' | 'rollback'): Promise<void> {
    // Kysely rolls back after a failed COMMIT, whose connection is already released: the
    // transaction is over either way, and the COMMIT's own error is the one to surface.
    if (statement === 'rollback' && this.#reserved === undefined) return;
    try {
      await this.#spans.end(statement, () => this.#onReserved(statement, []));
    } catch (error) {
      throw translate(error);
    } finally {
      this.#release();
    }
  }

  /**
   * A statement on the reserved connection, failing at once if that connection was lost.
   * `simple`: several statements without parameters, in one simple query.
   */
  #onReserved(text: string, parameters: readonly unknown[], simple = false) {
    const reserved = this.#reserved;
    if (reserved === undefined) return Promise.reject(new Error('No transaction is open on this connection'));
    return reserved.run(text, parameters, simple);
  }

  #release(): void {
    this.#reserved?.release();
    this.#reserved = undefined;
  }
}

/** Kysely hands back the connection this driver acquired; anything else is a bug. */
function own(connection: DatabaseConnection): PostgresJsConnection {
  if (!(connection instanceof PostgresJsConnection)) throw new TypeError('Not a connection of this driver');
  return connection;
}

class PostgresJsDriver implements Driver {
  constructor(
    private readonly pool: PostgresPool,
    private readonly afterBegin: string | undefined,
    private readonly fallback: PostgresPool | undefined,
  ) {}
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return new PostgresJsConnection(this.pool, this.afterBegin, this.fallback);
  }
  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await own(connection).begin(settings);
  }
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await own(connection).end('commit');
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await own(connection).end('rollback');
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {
    await this.pool.end({ timeout: 5 });
  }
}

/** A connection-level failure → DatabaseUnavailable (503 with Retry-After); anything else as it is. */
export function translate(error: unknown): unknown {
  // A statement that waited longer than DATABASE_QUEUE_TIMEOUT_MS for a connection was not sent.
  if ((error as { code?: unknown } | null)?.code === 'QUEUE_TIMEOUT') return new Overloaded('queue', { cause: error });
  return isConnectionError(error) ? new DatabaseUnavailable({ cause: error }) : error;
}
