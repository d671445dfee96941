// DATABASE_URL → a Kysely instance: PostgreSQL through postgres.js and our dialect, or the
// embedded PGlite (in memory, or persisted under DATA_DIR). One SQL dialect for both.
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Kysely } from 'kysely';
import type { Config } from '../config.js';
import type { Database } from './database.js';
import { lockDataDir } from './data-dir-lock.js';
import { pgliteDialect } from './pglite-dialect.js';
import { postgresJsDialect } from './postgres-js-dialect.js';
import { PostgresPool } from './postgres-pool.js';
import { withDirectRun } from './prepared.js';

export type Engine = 'postgres' | 'pglite';

export interface CreateDatabaseOptions {
  /** PostgreSQL only: a schema to put first on the search_path (tests isolate files this way). */
  schema?: string;
}

export async function createDatabase(
  config: Config['database'],
  options: CreateDatabaseOptions = {},
): Promise<{ db: Kysely<Database>; engine: Engine }> {
  if (config.kind === 'postgres') {
    const pool = new PostgresPool(config.url, config.poolSize, {
      prepare: true,
      // A server that is down answers at once; one that is unreachable must not hang requests.
      connect_timeout: 5,
      onnotice: () => {},
      types: {
        // int8 as a JS number: ids and counts stay far below 2^53.
        int8: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
      },
      connection: {
        application_name: 'resource-api',
        // DESIGN §9: PostgreSQL ends a runaway statement and an abandoned transaction itself.
        statement_timeout: config.statementTimeoutMs,
        idle_in_transaction_session_timeout: config.idleTransactionTimeoutMs,
        ...(options.schema ? { search_path: options.schema } : {}),
      },
    });
    const { dialect, run, everyConnection } = postgresJsDialect(pool);
    return {
      db: withDirectRun(new Kysely<Database>({ dialect }), run, everyConnection, config.poolSize),
      engine: 'postgres',
    };
  }

  const { PGlite } = await import('@electric-sql/pglite');
  let dataDir: string | undefined;
  let unlock = () => {};
  if (config.dataDir !== undefined) {
    dataDir = join(resolve(config.dataDir), 'pglite');
    await mkdir(dataDir, { recursive: true });
    unlock = lockDataDir(dataDir);
  }
  try {
    const pglite = await PGlite.create(dataDir);
    const { dialect, run, everyConnection } = pgliteDialect(pglite, unlock);
    return { db: withDirectRun(new Kysely<Database>({ dialect }), run, everyConnection, 1), engine: 'pglite' };
  } catch (error) {
    unlock();
    throw error;
  }
}
