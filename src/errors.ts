// Domain errors: what went wrong, in the service's terms. No HTTP here: the registry in
// http/problems/error-registry.ts maps each code to a status and a problem in every form
// (STYLE principle 5). A new error is a class here and one row there; tsc refuses a code
// without its row.

export type DomainErrorCode =
  | 'ENTITY_NOT_FOUND'
  | 'CONFLICT'
  | 'ORDER_ALREADY_CANCELLED'
  | 'INVALID_ORDER_STATE'
  | 'BUSINESS_RULE_VIOLATION'
  | 'DATABASE_UNAVAILABLE'
  | 'REQUEST_TIMED_OUT'
  | 'OVERLOADED'
  | 'FORBIDDEN'
  | 'UNAUTHENTICATED'
  | 'PRECONDITION_FAILED'
  | 'TOO_MANY_REQUESTS'
  | 'INVALID_IDEMPOTENCY_KEY'
  | 'IDEMPOTENCY_KEY_IN_USE'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'INVALID_FIELD';

export abstract class DomainError extends Error {
  abstract readonly code: DomainErrorCode;
}

/** The entity does not exist (or, for a caller without access, must look as if it did not). */
export class EntityNotFound extends DomainError {
  readonly code = 'ENTITY_NOT_FOUND';
  constructor(
    readonly entity: 'User' | 'Order' | 'Product' | 'Webhook subscription' | 'Webhook delivery',
    readonly id: number,
  ) {
    super(`${entity} ${id} not found`);
  }
}

/** A unique value is taken, or a concurrent change won the race. */
export class Conflict extends DomainError {
  readonly code: 'CONFLICT' | 'ORDER_ALREADY_CANCELLED' | 'INVALID_ORDER_STATE' = 'CONFLICT';
  constructor(
    message: string,
    readonly conflictingField?: string,
  ) {
    super(message);
  }
}

/** Well-formed but against a business rule (422). */
export class BusinessRuleViolation extends DomainError {
  readonly code = 'BUSINESS_RULE_VIOLATION';
  constructor(
    message: string,
    readonly extensions: Readonly<Record<string, string | number>> = {},
  ) {
    super(message);
  }
}

/** The database cannot be reached right now; the request may be retried (503). */
export class DatabaseUnavailable extends DomainError {
  readonly code = 'DATABASE_UNAVAILABLE';
  constructor(options?: { cause?: unknown }) {
    super('The database is unavailable', options);
  }
}

/** The caller is known but may not do this (403). `scope` names what would allow it. */
export class Forbidden extends DomainError {
  readonly code = 'FORBIDDEN';
  constructor(
    message: string,
    readonly scope: string,
  ) {
    super(message);
  }
}

/**
 * The work took longer than allowed (docs/api-guide.md#limits-and-time-outs): REQUEST_TIMEOUT_MS for the request, or the
 * database's statement time-out. The request may be retried later.
 */
export class RequestTimedOut extends DomainError {
  readonly code = 'REQUEST_TIMED_OUT';
  override readonly name = 'RequestTimedOut';
  constructor(options?: { cause?: unknown }) {
    super('The request took too long and was stopped', options);
  }
}

/**
 * The instance has more work than it can answer in time (docs/operations.md#overload): the
 * request was not started, or its statement waited too long for a database connection (503).
 */
export class Overloaded extends DomainError {
  readonly code = 'OVERLOADED';
  override readonly name = 'Overloaded';
  constructor(
    /** `busy`: readiness, while a request in flight is older than the instance can answer in time. */
    readonly reason: 'limit' | 'queue' | 'event_loop' | 'busy',
    options?: { cause?: unknown },
  ) {
    super('The service is overloaded', options);
  }
}

/** No valid credentials (401). `tokenRejected`: a token was sent but did not verify. */
export class Unauthenticated extends DomainError {
  readonly code = 'UNAUTHENTICATED';
  constructor(
    message: string,
    readonly tokenRejected: boolean,
  ) {
    super(message);
  }
}

/** A cancellation of an order that is already cancelled (409). */
export class OrderAlreadyCancelled extends Conflict {
  override readonly code = 'ORDER_ALREADY_CANCELLED';
  constructor(readonly orderId: number) {
    super(`Order ${orderId} is already cancelled.`);
  }
}

/** An action or change the order's current status does not allow (docs/api-guide.md#orders: 409). */
export class InvalidOrderState extends Conflict {
  override readonly code = 'INVALID_ORDER_STATE';
  constructor(
    readonly orderId: number,
    readonly currentStatus: string,
    what: string,
  ) {
    super(`Order ${orderId} is ${currentStatus}; it cannot be ${what}.`);
  }
}

/** If-Match named a version that is not the current one (412). */
export class PreconditionFailed extends DomainError {
  readonly code = 'PRECONDITION_FAILED';
  constructor(
    entity: 'User' | 'Order' | 'Product' | 'Webhook subscription' | 'Webhook delivery',
    id: number,
    readonly currentVersion: number,
  ) {
    super(`${entity} ${id} is at version ${currentVersion}, which If-Match does not name.`);
  }
}

/** The caller used up its quota (429); `retryAfterSeconds` until the window resets. */
export class TooManyRequests extends DomainError {
  readonly code = 'TOO_MANY_REQUESTS';
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number,
    message = `The quota of ${limit} requests per minute is used up. Retry after ${retryAfterSeconds} seconds.`,
  ) {
    super(message);
  }
}

/** An Idempotency-Key header that is not 1–255 visible ASCII characters (docs/api-guide.md#safe-retries: 400). */
export class InvalidIdempotencyKey extends DomainError {
  readonly code = 'INVALID_IDEMPOTENCY_KEY';
  constructor() {
    super(
      'The Idempotency-Key header must be 1 to 255 visible ASCII characters other than " and \\, sent as a string ("…") or a bare token.',
    );
  }
}

/** A request with this Idempotency-Key is still running (docs/api-guide.md#safe-retries: 409, retry shortly). */
export class IdempotencyKeyInUse extends DomainError {
  readonly code = 'IDEMPOTENCY_KEY_IN_USE';
  constructor() {
    super('A request with this Idempotency-Key is still in progress. Retry after it completes.');
  }
}

/** The Idempotency-Key was used before for another method, path or body (docs/api-guide.md#safe-retries: 422). */
export class IdempotencyKeyReused extends DomainError {
  readonly code = 'IDEMPOTENCY_KEY_REUSED';
  constructor() {
    super('Idempotency-Key was already used for a different request.');
  }
}

/**
 * A field the schema accepted but a rule refuses (a webhook URL that reaches a private
 * network): a 400 naming the field, like a schema's own validation error.
 */
export class InvalidField extends DomainError {
  readonly code = 'INVALID_FIELD';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}
