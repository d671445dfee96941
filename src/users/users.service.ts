// The users use cases (docs/api-guide.md#users). No HTTP, no SQL: rules, hashing and mapping.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { canReachUser, type Principal } from '../auth/principal.js';
import type { Db } from '../db/database.js';
import { edgesOf, pageWindow, parseSort, type PageOf, type Seek } from '../page.js';
import { BusinessRuleViolation, EntityNotFound, Forbidden, InvalidField, PreconditionFailed } from '../errors.js';
import { matchesVersion, type IfMatch } from '../preconditions.js';
import fastJson from 'fast-json-stringify';
import { afterCommit, transact } from '../db/transact.js';
import { idOnly, recordEvent } from '../events/index.js';
import { hashPassword, verifyPassword } from './passwords.js';
import * as repo from './users.repository.js';
import type { UserReadRow } from './users.repository.js';
import { USER_SORT_FIELDS, UserV1Schema, type PasswordChange } from './users.schemas.js';

/** An event's data (docs/webhooks.md): the v1 representation, through the v1 response schema. */
const userV1Json = fastJson(UserV1Schema);

export interface Address {
  street: string;
  postalCode: string;
}

/**
 * A user as the service knows it. Each version's response schema serializes only its own
 * members (v1: id, name, email, createdAt), so nothing else can reach a v1 client.
 */
export interface User {
  id: number;
  name: string;
  email: string;
  age: number | null;
  address: Address | null;
  /** The ETag (docs/api-guide.md#safe-retries); no version's schema lists it, so it is never in a body. */
  version: number;
  createdAt: string;
}

/** What a create or a change may carry; v1 sends no age or address, and so changes neither. */
export interface UserFields {
  name?: string;
  email?: string;
  age?: number | null;
  address?: Address | null;
}

/** docs/api-guide.md#users: createdAt is the UTC wall clock without zone, to the millisecond. */
export function toUser(row: UserReadRow): User {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    age: row.age ?? null,
    address:
      row.address_street == null || row.address_postal_code == null
        ? null
        : { street: row.address_street, postalCode: row.address_postal_code },
    version: row.version,
    createdAt: row.created_at.toISOString().slice(0, 23),
  };
}

function toColumns(fields: UserFields): repo.UserChanges {
  const out: repo.UserChanges = {};
  if (fields.name !== undefined) out.name = fields.name;
  if (fields.email !== undefined) out.email = fields.email;
  if (fields.age !== undefined) out.age = fields.age;
  if (fields.address !== undefined) {
    out.address_street = fields.address?.street ?? null;
    out.address_postal_code = fields.address?.postalCode ?? null;
  }
  return out;
}

/**
 * OWASP API1 (docs/api-guide.md#authentication-and-scopes): without admin, a caller reaches only its own user; any other answers
 * exactly as a missing one would. Every use case that takes a user id goes through here.
 */
function assertReachable(caller: Principal, id: number): void {
  if (!canReachUser(caller, id)) throw new EntityNotFound('User', id);
}

function assertAdmin(caller: Principal, what: string): void {
  if (!caller.admin) throw new Forbidden(`${what} needs the admin scope.`, 'admin');
}

/** `withProfile` false: age and address are not read (v1 shows neither); they come back null. */
export async function getUser(
  db: Db,
  caller: Principal,
  id: number,
  withProfile = true,
  /** True once the request's client has hung up: a read still waiting is not sent. */
  gone?: () => boolean,
): Promise<User> {
  assertReachable(caller, id);
  const row = withProfile ? await repo.findUserById(db, id, gone) : await repo.findUserV1ById(db, id, gone);
  if (row === undefined) throw new EntityNotFound('User', id);
  return toUser(row);
}

export interface UserListRequest {
  page: number;
  size: number;
  sort: string;
}

/** docs/api-guide.md#users: size above 100 is served as 100; ties broken by id. */
export async function listUsers(db: Db, caller: Principal, q: UserListRequest, seek?: Seek): Promise<PageOf<User>> {
  assertAdmin(caller, 'Listing users');
  const { size, offset } = pageWindow(q.page, q.size);
  const { rows, total } = await repo.listUsers(db, {
    offset,
    limit: size,
    ...parseSort(q.sort, USER_SORT_FIELDS, 'asc'),
    seek,
  });
  const edges = edgesOf(rows);
  return { content: rows.map(toUser), total, page: q.page, size, ...(edges && { edges }) };
}

/** What a create carries: a v1 create sends no age or address. */
export type NewUser = UserFields & { name: string; email: string; password: string };

export async function createUser(db: Db, caller: Principal, input: NewUser): Promise<User> {
  assertAdmin(caller, 'Creating a user');
  const passwordHash = await hashPassword(input.password); // before the transaction: ~50 ms of CPU
  return transact(db, async (trx) => {
    const user = toUser(
      await repo.insertUser(trx, {
        ...toColumns(input),
        name: input.name,
        email: input.email,
        password_hash: passwordHash,
      }),
    );
    await recordEvent(trx, {
      type: 'user.created',
      subject: `users/${user.id}`,
      data: userV1Json(user),
      owner: user.id,
    });
    return user;
  });
}

/**
 * A full replace (PUT replaces every field of the version's shape, which its schema makes
 * required) and docs/api-guide.md#users (PATCH changes only the fields sent; other members are ignored).
 */
export async function updateUser(
  db: Db,
  caller: Principal,
  id: number,
  input: UserFields,
  ifMatch?: IfMatch,
): Promise<User> {
  assertReachable(caller, id);
  const changes = toColumns(input);
  if (Object.keys(changes).length === 0) {
    // Nothing to write, and so no new version: still the precondition is checked.
    const user = await getUser(db, caller, id);
    if (!matchesVersion(ifMatch, user.version)) throw new PreconditionFailed('User', id, user.version);
    return user;
  }
  return transact(db, async (trx) => {
    const row = await repo.updateUser(trx, id, changes, ifMatch);
    if (row !== undefined) {
      const user = toUser(row);
      await recordEvent(trx, { type: 'user.updated', subject: `users/${id}`, data: userV1Json(user), owner: id });
      return user;
    }
    const current = await repo.findUserById(trx, id);
    if (current === undefined) throw new EntityNotFound('User', id);
    throw new PreconditionFailed('User', id, current.version);
  });
}

/**
 * Deleting is idempotent. The user's orders stay (docs/api-guide.md#users). Another user's
 * id, without admin, is a user that does not exist for this caller: nothing happens, 204.
 */
export async function deleteUser(db: Db, caller: Principal, id: number, ifMatch?: IfMatch): Promise<void> {
  if (!canReachUser(caller, id)) return;
  await transact(db, async (trx) => {
    if (await repo.deleteUserById(trx, id, ifMatch)) {
      await recordEvent(trx, { type: 'user.deleted', subject: `users/${id}`, data: idOnly(id), owner: id });
      return;
    }
    // Not deleted: already gone (204 all the same, no event), or at a version If-Match does not name.
    const current = ifMatch === undefined ? undefined : await repo.findUserById(trx, id);
    if (current !== undefined) throw new PreconditionFailed('User', id, current.version);
  });
}

export async function changePassword(db: Db, caller: Principal, id: number, input: PasswordChange): Promise<void> {
  assertReachable(caller, id);
  const current = await repo.findPasswordHash(db, id);
  if (current === undefined) throw new EntityNotFound('User', id);
  if (!(await verifyPassword(current, input.currentPassword)))
    throw new BusinessRuleViolation('The current password is incorrect.');
  const passwordHash = await hashPassword(input.newPassword);
  await transact(db, async (trx) => {
    const updated = await repo.updateUser(trx, id, { password_hash: passwordHash });
    if (updated === undefined) throw new EntityNotFound('User', id);
    // A changed password ends every reset link mailed before it (OWASP's forgot-password
    // guidance): one that leaked with the old password must not outlive it.
    await repo.deletePasswordResets(trx, id);
    await recordEvent(trx, { type: 'user.password_changed', subject: `users/${id}`, data: idOnly(id), owner: id });
  });
}

/** How a reset's link reaches its user: after the reset commits (users/password-reset-mail.ts). */
export interface PasswordResetDelivery {
  readonly ttlMinutes: number;
  /** Called once the reset has committed; must not throw or wait. */
  send(to: { name: string; email: string }, token: string): void;
}

/** A reset token's stored form: its SHA-256 (the token is 256 random bits; no salt needed). */
function hashResetToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * A password reset (docs/api-guide.md#users): a single-use random token, stored hashed, that ends the user's
 * earlier ones and goes to the user by mail once the reset has committed; sending never fails
 * or slows the request. Another user's reset, without admin, is a user that does not exist.
 */
export async function requestPasswordReset(
  db: Db,
  caller: Principal,
  id: number,
  delivery: PasswordResetDelivery,
): Promise<void> {
  assertReachable(caller, id);
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + delivery.ttlMinutes * 60_000);
  await transact(db, async (trx) => {
    const user = await repo.replacePasswordReset(trx, id, hashResetToken(token), expiresAt);
    if (user === undefined) throw new EntityNotFound('User', id);
    afterCommit(trx, () => delivery.send(user, token));
  });
}

const INVALID_RESET_TOKEN = 'must be a valid, unexpired reset token';

/**
 * Completes a reset: the token's user gets the new password, every outstanding reset of that
 * user ends, and `user.password_changed` is recorded. An unknown, used or expired token is a
 * 400 naming `token` and changes nothing. The token is looked up by its hash before the new
 * password is hashed, so that a guessed token costs no argon2 work.
 */
export async function completePasswordReset(db: Db, input: { token: string; newPassword: string }): Promise<void> {
  const tokenHash = hashResetToken(input.token);
  if (!(await repo.passwordResetIsValid(db, tokenHash))) throw new InvalidField('token', INVALID_RESET_TOKEN);
  const passwordHash = await hashPassword(input.newPassword);
  await transact(db, async (trx) => {
    const reset = await repo.takePasswordReset(trx, tokenHash);
    // Compared again in constant time: whatever the index did, no timing tells how near a guess was.
    if (reset === undefined || !sameHash(reset.tokenHash, tokenHash))
      throw new InvalidField('token', INVALID_RESET_TOKEN);
    const updated = await repo.updateUser(trx, reset.userId, { password_hash: passwordHash });
    if (updated === undefined) throw new InvalidField('token', INVALID_RESET_TOKEN);
    await repo.deletePasswordResets(trx, reset.userId);
    await recordEvent(trx, {
      type: 'user.password_changed',
      subject: `users/${reset.userId}`,
      data: idOnly(reset.userId),
      owner: reset.userId,
    });
  });
}

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}
