// A Kysely dialect over postgres.js. Plain queries go through the shared connections, where
// postgres.js prepares and pipelines them; only a transaction reserves a connection, from
// BEGIN to COMMIT/ROLLBACK. Connection-level failures become DatabaseUnavailable (DESIGN §7).
import { CompiledQuery, type DatabaseConnection, type Dialect, type Driver, type QueryResult, type TransactionSettings } from 'kysely';
import { beginStatement, postgresDialect } from './postgres-dialect.js';
import type { ReservedSql, Sql } from 'postgres';
import { DatabaseUnavailable } from '../errors.js';
import { isConnectionError } from './pg-errors.js';

export function postgresJsDialect(sql: Sql): Dialect {
  return postgresDialect(() => new PostgresJsDriver(sql));
}

const MUTATIONS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

class PostgresJsConnection implements DatabaseConnection {
  #reserved: ReservedSql | undefined;

  constructor(private readonly sql: Sql) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const target = this.#reserved ?? this.sql;
    try {
      const result = await target.unsafe(query.sql, query.parameters as never[], { prepare: true });
      return MUTATIONS.has(result.command)
        ? { rows: [...result] as R[], numAffectedRows: BigInt(result.count) }
        : { rows: [...result] as R[] };
    } catch (error) {
      throw translate(error);
    }
  }

  async *streamQuery<R>(query: CompiledQuery, chunkSize = 100): AsyncIterableIterator<QueryResult<R>> {
    const target = this.#reserved ?? this.sql;
    const cursor = target.unsafe(query.sql, query.parameters as never[], { prepare: true }).cursor(chunkSize);
    for await (const rows of cursor) yield { rows: rows as R[] };
  }

  async begin(settings: TransactionSettings): Promise<void> {
    try {
      this.#reserved = await this.sql.reserve();
    } catch (error) {
      throw translate(error);
    }
    const statement = beginStatement(settings);
    try {
      await this.#reserved.unsafe(statement);
    } catch (error) {
      this.#release();
      throw translate(error);
    }
  }

  async end(statement: 'commit' | 'rollback'): Promise<void> {
    try {
      await this.#reserved?.unsafe(statement);
    } catch (error) {
      throw translate(error);
    } finally {
      this.#release();
    }
  }

  #release(): void {
    this.#reserved?.release();
    this.#reserved = undefined;
  }
}

class PostgresJsDriver implements Driver {
  constructor(private readonly sql: Sql) {}
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return new PostgresJsConnection(this.sql);
  }
  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await (connection as PostgresJsConnection).begin(settings);
  }
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PostgresJsConnection).end('commit');
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PostgresJsConnection).end('rollback');
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {
    await this.sql.end({ timeout: 5 });
  }
}

function translate(error: unknown): unknown {
  return isConnectionError(error) ? new DatabaseUnavailable({ cause: error }) : error;
}
