// What our two dialects share: both speak PostgreSQL, so they differ only in their driver.
import {
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type Dialect,
  type Driver,
  type Kysely,
  type TransactionSettings,
} from 'kysely';

export function postgresDialect(createDriver: () => Driver): Dialect {
  return {
    createAdapter: () => new PostgresAdapter(),
    createDriver,
    createQueryCompiler: () => new PostgresQueryCompiler(),
    createIntrospector: (db: Kysely<unknown>) => new PostgresIntrospector(db),
  };
}

/** BEGIN with the settings Kysely passes. */
export function beginStatement(settings: TransactionSettings): string {
  let statement = 'begin';
  if (settings.isolationLevel) statement += ` isolation level ${settings.isolationLevel}`;
  if (settings.accessMode) statement += ` ${settings.accessMode}`;
  return statement;
}
