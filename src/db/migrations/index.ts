import type { Migration } from 'kysely';
import * as m0001 from './0001_users.js';
import * as m0002 from './0002_password_resets.js';

/** Forward-only, applied in key order. Never edit a migration that has shipped; add one. */
export const migrations: Record<string, Migration> = {
  '0001_users': m0001,
  '0002_password_resets': m0002,
};
