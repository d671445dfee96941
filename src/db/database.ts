import type { Kysely, Transaction } from 'kysely';
import type { PasswordResetsTable, UsersTable } from '../users/users.table.js';

/** Every table the service owns, by its SQL name (snake_case; the API is camelCase). */
export interface Database {
  users: UsersTable;
  password_resets: PasswordResetsTable;
}

/** A repository's first argument: the database, or the transaction it must run inside. */
export type Db = Kysely<Database> | Transaction<Database>;
