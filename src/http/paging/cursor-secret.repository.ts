// The key that signs list cursors (pagination.ts): made by the first instance that needs
// it and kept in the database, so that a cursor from one instance is good on every other.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../../db/database.js';

/** The stored key, storing a new random one first if there is none (one statement). */
export async function loadCursorSecret(db: Db): Promise<Buffer> {
  const candidate = randomBytes(32).toString('base64');
  // The CTE's insert is invisible to the outer select of the same statement: one of the two
  // branches gives the row, whichever instance won.
  const { rows } = await sql<{ secret: string }>`
    with created as (
      insert into cursor_secrets (id, secret) values (1, ${candidate}) on conflict (id) do nothing returning secret
    )
    select secret from created union all select secret from cursor_secrets where id = 1`.execute(db);
  const secret = rows[0]?.secret;
  if (secret === undefined) throw new Error('No cursor secret could be stored');
  return Buffer.from(secret, 'base64');
}
