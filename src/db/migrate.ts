import { Migrator, sql, type Kysely } from 'kysely';
import type { Config } from '../config/config.js';
import { createDatabase } from './create-database.js';
import type { Database } from './database.js';
import { migrations } from './migrations/index.js';

/**
 * Applies pending migrations. On PostgreSQL, Kysely holds an advisory lock for the run, so
 * several instances starting at once apply each migration exactly once.
 */
export async function migrateToLatest(db: Kysely<Database>, schema?: string): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) throw error instanceof Error ? error : new Error('Migration failed', { cause: error });
  return results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * Brings the database up to date before the service uses it: the migrations, on PostgreSQL
 * over DATABASE_DIRECT_URL when one is set apart from DATABASE_URL (a pooler in transaction mode
 * cannot carry the migration's session); behind such a pooler, also the role's time-out defaults.
 */
export async function prepareDatabase(
  config: Config['database'],
  db: Kysely<Database>,
  options: { schema?: string } = {},
): Promise<string[]> {
  if (config.kind !== 'postgres' || (config.pooler !== 'transaction' && config.directUrl === config.url))
    return migrateToLatest(db, options.schema);
  const { db: direct } = await createDatabase(config, { ...options, direct: true });
  try {
    const applied = await migrateToLatest(direct, options.schema);
    if (config.pooler === 'transaction') {
      await applyRoleTimeouts(direct, config);
      // Statements through the pooler carry their values as quoted literals (inline-parameters.ts).
      const { rows } = await sql<{ on: string }>`select current_setting('standard_conforming_strings') as on`.execute(
        direct,
      );
      if (rows[0]?.on !== 'on')
        throw new Error('DATABASE_POOLER=transaction needs standard_conforming_strings = on (the default)');
    }
    return applied;
  } finally {
    await direct.destroy();
  }
}

/**
 * Behind a pooler in transaction mode, a statement outside a transaction runs on whatever server
 * connection the pooler hands out, with the settings that connection was opened with: the
 * time-outs (docs/api-guide.md#limits-and-time-outs) become the defaults of the service's role in its database, which every
 * new server connection picks up. Transactions set them again themselves (`set local`).
 */
export async function applyRoleTimeouts(
  db: Kysely<Database>,
  timeouts: { statementTimeoutMs: number; idleTransactionTimeoutMs: number },
): Promise<void> {
  const settings = {
    statement_timeout: Math.trunc(timeouts.statementTimeoutMs),
    idle_in_transaction_session_timeout: Math.trunc(timeouts.idleTransactionTimeoutMs),
  };
  for (const [name, ms] of Object.entries(settings)) {
    await sql`
      do $$ begin
        execute format('alter role %I in database %I set ${sql.raw(name)} = %L', current_user, current_database(), ${sql.lit(`${ms}ms`)});
      end $$`.execute(db);
  }
}
