// DATABASE_URL → a Kysely instance: PostgreSQL through postgres.js and our dialect, or the
// embedded PGlite (in memory, or persisted under DATA_DIR). One SQL dialect for both.
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Kysely } from 'kysely';
import type { Config } from '../config/config.js';
import { trackAnswers, type Database } from './database.js';
import { lockDataDir } from './data-dir-lock.js';
import { pgliteDialect } from './pglite-dialect.js';
import { openPGlite } from './pglite-image.js';
import { postgresJsDialect, translate } from './postgres-js-dialect.js';
import { PostgresPool } from './postgres-pool.js';
import { arrayText, parseArray } from './inline-parameters.js';
import { withDirectRun } from './prepared.js';
import { gatherReads } from './prepared-by-id.js';

export type Engine = 'postgres' | 'pglite';

export { reconnectDelaySeconds } from './reconnect-delay.js';

/**
 * How every connection of the service reaches its server: a server that is down answers at
 * once, one that is unreachable must not hang requests for long. The hosts, the primary among
 * several, and the pace of reconnection are the pool's (postgres-pool.ts) and the LISTEN
 * connection's (notifications.ts), not postgres.js's.
 */
export function reconnection() {
  return { connect_timeout: 5 };
}

/**
 * How long past its statement time-out a connection with statements in flight may stay silent
 * before the pool ends it (postgres-pool.ts, answerTimeoutMs): the statement's cancellation has
 * to travel back, on a machine that may be loaded.
 */
const ANSWER_MARGIN_MS = 2000;

const pools = new WeakMap<object, PostgresPool>();

/** The pool beneath a database made here (undefined on the embedded engine): its metrics. */
export function poolOf(db: object): PostgresPool | undefined {
  return pools.get(db);
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
): Promise<{
  db: Kysely<Database>;
  engine: Engine;
  pool?: PostgresPool;
  /** A new embedded database: keeps its image once migrated, for the next one (pglite-image.ts). */
  saveImage?: () => Promise<void>;
}> {
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
    const { pglite, saveImage } = await openPGlite(PGlite, dataDir); // a new one from an image
    const { dialect, run, everyConnection } = pgliteDialect(pglite, unlock);
    const db = withDirectRun(new Kysely<Database>({ dialect }), { run, everyConnection, connections: 1 });
    return { db, engine: 'pglite', ...(saveImage === undefined ? {} : { saveImage }) };
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
      ...reconnection(),
      onnotice: () => {},
      types: {
        // int8 as a JS number: ids and counts stay far below 2^53.
        int8: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
        // Arrays the service reads (the driver fetches no array types): text[], varchar[], uuid[]…
        textArray: {
          to: 1009,
          from: [1009, 1015, 2951],
          serialize: (x: unknown[] | string) => (typeof x === 'string' ? x : arrayText(x)),
          parse: (x: string) => parseArray(x, String),
        },
        // … int2[], int4[], int8[] as numbers, bool[].
        numberArray: {
          to: 1016,
          from: [1005, 1007, 1016],
          serialize: (x: unknown[] | string) => (typeof x === 'string' ? x : arrayText(x)),
          parse: (x: string) => parseArray(x, Number),
        },
        boolArray: {
          to: 1000,
          from: [1000],
          serialize: (x: unknown[] | string) => (typeof x === 'string' ? x : arrayText(x)),
          parse: (x: string) => parseArray(x, (v) => v === 't'),
        },
      },
      connection: {
        application_name: 'resource-api',
        // docs/api-guide.md#limits-and-time-outs: PostgreSQL ends a runaway statement and an abandoned transaction itself.
        ...(options.pooled ? {} : timeouts),
        ...(options.schema ? { search_path: options.schema } : {}),
      },
    },
    // A replica's errors go to its dialect untranslated: some are answered by the primary.
    {
      inline: options.pooled,
      lazy: options.pooled,
      queueTimeoutMs: config.queueTimeoutMs,
      // A live server answers each statement within its statement time-out (it cancels it then).
      answerTimeoutMs: config.statementTimeoutMs + ANSWER_MARGIN_MS,
      ...(options.fallback === undefined ? { translate } : {}),
    },
  );
  const afterBegin = options.pooled
    ? Object.entries(timeouts)
        .map(([name, ms]) => `set local ${name} = ${Math.trunc(ms)}`)
        .join('; ')
    : undefined;
  const { dialect, run, everyConnection, onPrimary } = postgresJsDialect(pool, {
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
  gatherReads(db, options.pooled ? 'pooled' : 'direct');
  pools.set(db, pool);
  withDirectRun(db, {
    run,
    everyConnection,
    connections: size,
    queueTimeoutMs: config.queueTimeoutMs,
    onPrimary,
    queueTimedOut: () => pool.queueTimedOut(),
  });
  return { db, pool };
}
