import { Migrator, type Kysely } from 'kysely';
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
