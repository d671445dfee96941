import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

export interface UsersTable {
  id: Generated<number>;
  name: string;
  email: string;
  password_hash: string;
  age: number | null;
  address_street: string | null;
  address_postal_code: string | null;
  /** Incremented by every change; the ETag (docs/api-guide.md#safe-retries). */
  version: Generated<number>;
  created_at: ColumnType<Date, never, never>;
  updated_at: ColumnType<Date, never, Date>;
}

export interface PasswordResetsTable {
  id: Generated<number>;
  user_id: number;
  token_hash: string;
  expires_at: Date;
  created_at: ColumnType<Date, never, never>;
}

export type UserRow = Selectable<UsersTable>;
export type NewUserRow = Insertable<UsersTable>;
