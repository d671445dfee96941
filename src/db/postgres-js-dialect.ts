// A Kysely dialect over our pool of postgres.js connections (postgres-pool.ts). Plain queries
// go through the shared connections, where postgres.js prepares and pipelines them; only a
// transaction reserves a connection, from BEGIN to COMMIT/ROLLBACK. Connection-level failures
// become DatabaseUnavailable (DESIGN §7).
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import { beginStatement, postgresDialect } from './postgres-dialect.js';
import { canRetry, connectionLost, type PostgresPool, type Reservation } from './postgres-pool.js';
import type { DirectRun, EveryConnectionRun } from './prepared.js';
import { DatabaseUnavailable } from '../errors.js';
import { isConnectionError } from './pg-errors.js';

export function postgresJsDialect(pool: PostgresPool): {
  dialect: Dialect;
  run: DirectRun;
  everyConnection: EveryConnectionRun;
} {
  return {
    dialect: postgresDialect(() => new PostgresJsDriver(pool)),
    // One statement on the shared connections, for the prepared hot queries (prepared.ts).
    run: (sql, parameters, options) =>
      pool.query(sql, parameters, options).then(
        (rows) => ({ rows }),
        (error: unknown) => {
          throw translate(error);
        },
      ),
    everyConnection: (sql, parameters) =>
      pool.onEveryConnection(sql, parameters).then(
        (results) => results.map((rows) => [...rows]),
        (error: unknown) => {
          throw translate(error);
        },
      ),
  };
}

const MUTATIONS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

class PostgresJsConnection implements DatabaseConnection {
  #reserved: Reservation | undefined;

  constructor(private readonly pool: PostgresPool) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const result =
        this.#reserved === undefined
          ? await this.pool.query(query.sql, query.parameters)
          : await this.#onReserved(query.sql, query.parameters);
      return MUTATIONS.has(result.command)
        ? { rows: [...result] as R[], numAffectedRows: BigInt(result.count) }
        : { rows: [...result] as R[] };
    } catch (error) {
      throw translate(error);
    }
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize = 100): AsyncIterableIterator<QueryResult<R>> {
    const target = this.#reserved?.sql ?? this.pool.anyClient();
    const cursor = target.unsafe(query.sql, query.parameters as never[], { prepare: true }).cursor(chunkSize);
    for await (const rows of cursor) yield { rows: rows as R[] };
  }

  async begin(settings: TransactionSettings, retried = false): Promise<void> {
    try {
      this.#reserved = await this.pool.reserve();
    } catch (error) {
      throw translate(error);
    }
    const statement = beginStatement(settings);
    try {
      await this.#onReserved(statement, []);
    } catch (error) {
      this.#release();
      // A BEGIN lost with a stale connection changed nothing: once more, on a fresh one.
      if (!retried && canRetry(statement, error)) return this.begin(settings, true);
      throw translate(error);
    }
  }

  async end(statement: 'commit' | 'rollback'): Promise<void> {
    // Kysely rolls back after a failed COMMIT, whose connection is already released: the
    // transaction is over either way, and the COMMIT's own error is the one to surface.
    if (statement === 'rollback' && this.#reserved === undefined) return;
    try {
      await this.#onReserved(statement, []);
    } catch (error) {
      throw translate(error);
    } finally {
      this.#release();
    }
  }

  /** A statement on the reserved connection, failing at once if that connection was lost. */
  #onReserved(text: string, parameters: readonly unknown[]) {
    const reserved = this.#reserved;
    if (reserved === undefined) return Promise.reject(new Error('No transaction is open on this connection'));
    if (reserved.isLost()) return Promise.reject(connectionLost());
    return Promise.race([reserved.sql.unsafe(text, parameters as never[], { prepare: true }), reserved.lost]);
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
  constructor(private readonly pool: PostgresPool) {}
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return new PostgresJsConnection(this.pool);
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

function translate(error: unknown): unknown {
  return isConnectionError(error) ? new DatabaseUnavailable({ cause: error }) : error;
}
