// DATABASE_URL → a Kysely instance: PostgreSQL through postgres.js and our dialect, or the
// embedded PGlite (in memory, or persisted under DATA_DIR). One SQL dialect for both.
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Kysely } from 'kysely';
import type { Config } from '../config.js';
import { trackAnswers, type Database } from './database.js';
import { lockDataDir } from './data-dir-lock.js';
import { pgliteDialect } from './pglite-dialect.js';
import { postgresJsDialect } from './postgres-js-dialect.js';
import { PostgresPool } from './postgres-pool.js';
import { gatherReads, withDirectRun } from './prepared.js';

export type Engine = 'postgres' | 'pglite';

/**
 * Whether a URL names several hosts, as libpq's do (`postgres://h1:5432,h2:5432/db`): the
 * service must then write only to the one that is the primary. postgres.js 3.4 judges
 * `target_session_attrs=read-write` by `default_transaction_read_only` alone, which a hot standby
 * reports as off, so it would take a standby for a primary (and every write there fails with
 * 25006); `primary` asks `in_hot_standby`, which PostgreSQL 14+ reports and updates at promotion.
 * So with several hosts the service asks for the primary, whatever the URL says.
 */
function listsHosts(url: string): boolean {
  const authority = /^[a-z]+:\/\/(?:[^@/]*@)?([^/?#]*)/i.exec(url)?.[1] ?? '';
  return authority.includes(',');
}

/**
 * Seconds before a connection's next attempt after `retries` failed ones: 50 ms doubling, at most
 * one second, each between half and all of it (many instances do not retry in step).
 */
export function reconnectDelaySeconds(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1);
}

/**
 * How every connection of the service finds its server and comes back after losing it (the
 * pool's, the replicas', the LISTEN connection): with several hosts, the primary; a server that
 * is down answers at once, one that is unreachable must not hang requests; and postgres.js's own
 * wait before each reconnection after a failed one (3^n / 100 s, up to 20 s) left a connection
 * asleep for seconds after a standby took over, with the requests queued on it: a second at most,
 * jittered. (As patched, patches/postgres+3.4.9.patch, the same wait paces a connection's rounds
 * of the hosts while none of them is the primary.)
 */
export function reconnection(url: string) {
  return {
    ...(listsHosts(url) ? { target_session_attrs: 'primary' as const } : {}),
    connect_timeout: 5,
    backoff: reconnectDelaySeconds,
  };
}

export interface CreateDatabaseOptions {
  /** PostgreSQL only: a schema to put first on the search_path (tests isolate files this way). */
  schema?: string;
  /**
   * PostgreSQL only: one session on DATABASE_DIRECT_URL, never through the pooler, for what
   * needs a session (migrations, the role's settings).
   */
  direct?: boolean;
}

type PostgresConfig = Extract<Config['database'], { kind: 'postgres' }>;

export async function createDatabase(
  config: Config['database'],
  options: CreateDatabaseOptions = {},
): Promise<{ db: Kysely<Database>; engine: Engine; pool?: PostgresPool }> {
  if (config.kind === 'postgres') {
    const direct = options.direct === true;
    const { db, pool } = postgresDatabase(
      config,
      direct ? config.directUrl : config.url,
      direct ? 1 : config.poolSize,
      {
        // Behind a pooler in transaction mode, a server connection serves another client after
        // each transaction: no named prepared statements, and no session state, startup parameters
        // included (PgBouncer refuses statement_timeout there). The time-outs are then set per
        // transaction (afterBegin) and as the role's defaults (applyRoleTimeouts).
        pooled: config.pooler === 'transaction' && !direct,
        ...(options.schema === undefined ? {} : { schema: options.schema }),
      },
    );
    return { db, engine: 'postgres', pool };
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

/**
 * A read replica (DATABASE_REPLICA_URLS) as a database of its own: its statements go to the
 * replica, and one the replica cannot answer (it is down, it cancelled the statement for a
 * conflict with recovery, or the statement writes) runs again on `primary`. A replica never
 * answers a request with an error of its own.
 */
export function createReplicaDatabase(
  config: PostgresConfig,
  url: string,
  primary: PostgresPool,
  options: { schema?: string } = {},
): { db: Kysely<Database>; pool: PostgresPool } {
  const size = Math.max(1, Math.ceil(config.poolSize / 2));
  return postgresDatabase(config, url, size, { pooled: false, fallback: primary, ...options });
}

function postgresDatabase(
  config: PostgresConfig,
  url: string,
  size: number,
  options: { pooled: boolean; schema?: string; fallback?: PostgresPool },
): { db: Kysely<Database>; pool: PostgresPool } {
  const timeouts = {
    statement_timeout: config.statementTimeoutMs,
    idle_in_transaction_session_timeout: config.idleTransactionTimeoutMs,
  };
  const pool = new PostgresPool(
    url,
    size,
    {
      prepare: !options.pooled,
      ...reconnection(url),
      onnotice: () => {},
      types: {
        // int8 as a JS number: ids and counts stay far below 2^53.
        int8: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
      },
      connection: {
        application_name: 'resource-api',
        // docs/api-guide.md#limits-and-time-outs: PostgreSQL ends a runaway statement and an abandoned transaction itself.
        ...(options.pooled ? {} : timeouts),
        ...(options.schema ? { search_path: options.schema } : {}),
      },
    },
    { inline: options.pooled },
  );
  const afterBegin = options.pooled
    ? Object.entries(timeouts)
        .map(([name, ms]) => `set local ${name} = ${Math.trunc(ms)}`)
        .join('; ')
    : undefined;
  const { dialect, run, everyConnection } = postgresJsDialect(pool, {
    ...(afterBegin === undefined ? {} : { afterBegin }),
    ...(options.fallback === undefined ? {} : { fallback: options.fallback }),
  });
  const db = new Kysely<Database>({ dialect });
  // Kysely ends its driver only if a query of its own ever ran; prepared statements bypass it
  // (prepared.ts), so a database used only through them would keep its connections open.
  const destroy = db.destroy.bind(db);
  db.destroy = async () => {
    await destroy();
    await pool.end({ timeout: 5 });
  };
  trackAnswers(db, (withinMs) => pool.answeredWithin(withinMs));
  if (options.pooled) gatherReads(db);
  return { db: withDirectRun(db, run, everyConnection, size), pool };
}
