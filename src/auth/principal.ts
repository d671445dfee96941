// Who is calling (docs/api-guide.md#authentication-and-scopes): the token's subject, its scopes, and whether it may act on any
// object (admin). Services take it as an argument; nothing here knows about HTTP or JWTs.

export interface Principal {
  readonly subject: string;
  /** The caller's user id: the token's sub when it is a positive integer. */
  readonly userId: number | undefined;
  readonly scopes: ReadonlySet<string>;
  readonly admin: boolean;
  /** When the token ends (ms since the epoch): what outlives a request, a stream, ends with it. */
  readonly expiresAt?: number | undefined;
}

export function principalFrom(subject: string, scopes: Iterable<string>, expiresAt?: number): Principal {
  const set = new Set(scopes);
  const id = /^[1-9]\d{0,15}$/.test(subject) ? Number(subject) : undefined;
  return {
    subject,
    userId: id !== undefined && Number.isSafeInteger(id) ? id : undefined,
    scopes: set,
    admin: set.has('admin'),
    expiresAt,
  };
}

/** True when the caller may reach the user `id`: its own, or any with admin (OWASP API1). */
export function canReachUser(caller: Principal, id: number): boolean {
  return caller.admin || caller.userId === id;
}
