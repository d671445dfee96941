// SQL for users, and nothing else. Driver errors become domain errors here.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isUniqueViolation } from '../db/pg-errors.js';
import { compilable, prepare, prepareVariants, type Statement } from '../db/prepared.js';
import { anyOf, prepareById } from '../db/prepared-by-id.js';
import { countOf } from '../db/row-counts.js';
import { pageAndTotal, pageMode, pageQuery, type PageMode } from '../db/keyset.js';
import type { Seek, SortDirection } from '../page.js';
import { versionMatches } from '../db/versions.js';
import type { IfMatch } from '../preconditions.js';
import { Conflict } from '../errors.js';
import type { NewUserRow, UserRow } from './users.table.js';

/** The columns a response may show; password_hash is never among them. */
const PUBLIC_COLUMNS = [
  'id',
  'name',
  'email',
  'age',
  'address_street',
  'address_postal_code',
  'version',
  'created_at',
] as const;
export type PublicUserRow = Pick<UserRow, (typeof PUBLIC_COLUMNS)[number]>;
/** The columns v1 shows (and the version, for the ETag): no age or address. */
const V1_COLUMNS = ['id', 'name', 'email', 'version', 'created_at'] as const;
/** A user as read for v1 or v2: the profile columns only when v2's were selected. */
export type UserReadRow = Pick<UserRow, (typeof V1_COLUMNS)[number]> & Partial<PublicUserRow>;

/** The API's sort fields and their columns; the wire schema offers exactly these (tsc checks). */
const SORT_COLUMNS = { id: 'id', name: 'name', email: 'email', createdAt: 'created_at' } as const satisfies Record<
  string,
  keyof UserRow
>;
export type UserSort = keyof typeof SORT_COLUMNS;
const COLUMN_TYPES = { id: 'bigint', name: 'text', email: 'text', created_at: 'timestamptz' } as const;

function translate(error: unknown): never {
  if (isUniqueViolation(error, 'users_email_key'))
    throw new Conflict('A user with this email already exists.', 'email');
  throw error;
}

const selectUserById = prepareById(
  prepare(1, (db, id: number) => db.selectFrom('users').select(PUBLIC_COLUMNS).where('id', '=', id), {
    warmUp: [0],
    repeatable: true,
  }),
  prepare(1, (db, ids: string) => db.selectFrom('users').select(PUBLIC_COLUMNS).where('id', '=', anyOf(ids)), {
    warmUp: ['0'],
    repeatable: true,
  }),
);

/** `gone`: true once the read's client has hung up; a read still waiting for its statement is then not sent. */
export async function findUserById(db: Db, id: number, gone?: () => boolean): Promise<PublicUserRow | undefined> {
  return (await selectUserById(db, id, gone))[0];
}

const selectUserV1ById = prepareById(
  prepare(1, (db, id: number) => db.selectFrom('users').select(V1_COLUMNS).where('id', '=', id), {
    warmUp: [0],
    repeatable: true,
  }),
  prepare(1, (db, ids: string) => db.selectFrom('users').select(V1_COLUMNS).where('id', '=', anyOf(ids)), {
    warmUp: ['0'],
    repeatable: true,
  }),
);

/** A user's v1 columns: `GET /api/v1/users/{id}` reads no more than it shows (`gone`: as findUserById). */
export async function findUserV1ById(db: Db, id: number, gone?: () => boolean): Promise<UserReadRow | undefined> {
  return (await selectUserV1ById(db, id, gone))[0];
}

export async function findPasswordHash(db: Db, id: number): Promise<string | undefined> {
  const row = await db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst();
  return row?.password_hash;
}

export function insertUser(db: Db, row: NewUserRow): Promise<PublicUserRow> {
  return db.insertInto('users').values(row).returning(PUBLIC_COLUMNS).executeTakeFirstOrThrow().catch(translate);
}

/** Updates the given columns; undefined when the user does not exist. */
export type UserChanges = Partial<
  Pick<UserRow, 'name' | 'email' | 'password_hash' | 'age' | 'address_street' | 'address_postal_code'>
>;

/**
 * Updates the given columns and the version, if the user exists and (with If-Match) is at a
 * version it names: check and write are one statement, so of two writers sending the same
 * If-Match one wins. Undefined otherwise.
 */
export function updateUser(
  db: Db,
  id: number,
  changes: UserChanges,
  ifMatch?: IfMatch,
): Promise<PublicUserRow | undefined> {
  return db
    .updateTable('users')
    .set({ ...changes, version: sql<number>`version + 1`, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where(versionMatches(ifMatch))
    .returning(PUBLIC_COLUMNS)
    .executeTakeFirst()
    .catch(translate);
}

/** Deletes the user if it exists and (with If-Match) is at a version it names; true if it did. */
export async function deleteUserById(db: Db, id: number, ifMatch?: IfMatch): Promise<boolean> {
  const deleted = await db.deleteFrom('users').where('id', '=', id).where(versionMatches(ifMatch)).executeTakeFirst();
  return deleted.numDeletedRows > 0n;
}

export interface UserListParams {
  offset: number;
  limit: number;
  sort: UserSort;
  direction: SortDirection;
  seek?: Seek | undefined;
}

export type UserListRow = PublicUserRow & { sort_key: string };

/**
 * One page and the total, as two statements sent together: postgres.js pipelines them, so it
 * costs one round trip. The page comes from the sort's index (db/keyset.ts); the total from the
 * counters the triggers keep (migration 0008), never from count(*).
 */
export async function listUsers(db: Db, p: UserListParams): Promise<{ rows: UserListRow[]; total: number }> {
  return pageAndTotal(
    p,
    async () => (await countUsers(db))[0]?.count ?? 0,
    (mode, limit, offset) => selectUserPage(...pageArgs(db, p, mode, limit, offset)),
  );
}

/** The statement listUsers sends for the page (test/lists/list-plans.test.ts explains it). */
export function userPageStatement(db: Db, p: UserListParams, mode = pageMode(p.seek)): Statement {
  return selectUserPage.statement(...pageArgs(db, p, mode, p.limit, p.offset));
}

function pageArgs(db: Db, p: UserListParams, mode: PageMode, limit: number, offset: number) {
  return [`${p.sort},${p.direction},${mode}`, db, limit, offset, p.seek?.value, p.seek?.id] as const;
}

const selectUserPage = prepareVariants(
  4,
  (key: `${UserSort},${SortDirection},${PageMode}`) => {
    const [sort, direction, mode] = key.split(',') as [UserSort, SortDirection, PageMode];
    // Ties are broken by id ascending in both directions (docs/api-guide.md#users).
    const column = SORT_COLUMNS[sort];
    const order = { column, type: COLUMN_TYPES[column], direction, idDirection: 'asc' } as const;
    return (db, limit: number, offset: number, seekValue: string | undefined, seekId: number | undefined) =>
      compilable<UserListRow>(
        db,
        pageQuery({
          table: 'users',
          columns: PUBLIC_COLUMNS,
          filters: undefined,
          order,
          mode,
          limit,
          offset,
          seekValue,
          seekId,
        }),
      );
  },
  { repeatable: true },
);

const countUsers = prepare(0, (db) => compilable<{ count: number }>(db, countOf('users')), {
  warmUp: [],
  repeatable: true,
});

/**
 * A new reset for the user, ending every earlier one (only the newest link works). Returns
 * the user's name and e-mail, to write to; undefined when the user does not exist.
 */
export async function replacePasswordReset(
  db: Db,
  userId: number,
  tokenHash: string,
  expiresAt: Date,
): Promise<{ name: string; email: string } | undefined> {
  const result = await sql<{ name: string; email: string }>`
    with ended as (delete from password_resets where user_id = ${userId}),
    inserted as (
      insert into password_resets (user_id, token_hash, expires_at)
      select id, ${tokenHash}, ${expiresAt} from users where id = ${userId}
      returning user_id
    )
    select u.name, u.email from users u join inserted i on i.user_id = u.id`.execute(db);
  return result.rows[0];
}

/**
 * Takes the reset whose token hashes to `tokenHash`, whether or not it has expired: a token
 * is used at most once. Returns its user and the stored hash (compared again by the caller in
 * constant time) when it had not expired; undefined otherwise.
 */
export async function takePasswordReset(
  db: Db,
  tokenHash: string,
): Promise<{ userId: number; tokenHash: string } | undefined> {
  const row = await db
    .deleteFrom('password_resets')
    .where('token_hash', '=', tokenHash)
    .returning(['user_id', 'token_hash', sql<boolean>`expires_at > now()`.as('valid')])
    .executeTakeFirst();
  return row?.valid ? { userId: row.user_id, tokenHash: row.token_hash } : undefined;
}

/** Whether a reset with this token hash exists and has not expired (read only). */
export async function passwordResetIsValid(db: Db, tokenHash: string): Promise<boolean> {
  const row = await db
    .selectFrom('password_resets')
    .select('id')
    .where('token_hash', '=', tokenHash)
    .where('expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
  return row !== undefined;
}

/** Ends every outstanding reset of the user (its password changed). */
export async function deletePasswordResets(db: Db, userId: number): Promise<void> {
  await db.deleteFrom('password_resets').where('user_id', '=', userId).execute();
}
