// The error registry (STYLE principle 5, supabase/storage's ERRORS): every domain error code →
// its problem. One row per code; tsc refuses a DomainErrorCode without a row. to-problem.ts
// reads it; nothing else decides how a domain error looks on the wire.
import type {
  BusinessRuleViolation,
  Conflict,
  DatabaseUnavailable,
  DomainError,
  DomainErrorCode,
  EntityNotFound,
  Forbidden,
  IdempotencyKeyInUse,
  IdempotencyKeyReused,
  InvalidField,
  InvalidIdempotencyKey,
  InvalidOrderState,
  Overloaded,
  OrderAlreadyCancelled,
  PreconditionFailed,
  RequestTimedOut,
  TooManyRequests,
  Unauthenticated,
} from '../../errors.js';
import type { ProblemSlug } from './problem-types.js';

/** Seconds a client should wait before retrying while the database is unreachable. */
const RETRY_AFTER_SECONDS = 5;

/** The v1 forms whose problems are about:blank with a title of their own. */
export type V1Form = 'users-v1' | 'orders-v1';

export interface ErrorEntry<E extends DomainError> {
  /**
   * A typed problem's slug (its status and title come from problem-types.ts), or a status for
   * an about:blank problem titled with the status's reason phrase.
   */
  type: ProblemSlug | number;
  /** The `detail`; the error's message when absent. `request`: what is known of the request it answers. */
  detail?: (error: E, request: RequestFacts) => string;
  /** Members after the standard five. */
  extensions?: (error: E) => Record<string, unknown>;
  headers?: (error: E) => Record<string, string>;
  /**
   * Where a v1 form differs: an about:blank problem with this title, and these
   * extensions instead of the row's. Returning undefined keeps the row's problem.
   */
  forms?: Partial<Record<V1Form, (error: E) => { title: string; extensions?: Record<string, unknown> } | undefined>>;
}

type ErrorOf = {
  ENTITY_NOT_FOUND: EntityNotFound;
  CONFLICT: Conflict;
  ORDER_ALREADY_CANCELLED: OrderAlreadyCancelled;
  INVALID_ORDER_STATE: InvalidOrderState;
  BUSINESS_RULE_VIOLATION: BusinessRuleViolation;
  DATABASE_UNAVAILABLE: DatabaseUnavailable;
  REQUEST_TIMED_OUT: RequestTimedOut;
  OVERLOADED: Overloaded;
  FORBIDDEN: Forbidden;
  UNAUTHENTICATED: Unauthenticated;
  PRECONDITION_FAILED: PreconditionFailed;
  TOO_MANY_REQUESTS: TooManyRequests;
  INVALID_IDEMPOTENCY_KEY: InvalidIdempotencyKey;
  IDEMPOTENCY_KEY_IN_USE: IdempotencyKeyInUse;
  IDEMPOTENCY_KEY_REUSED: IdempotencyKeyReused;
  INVALID_FIELD: InvalidField;
};

/** What is known of the request a problem answers, where its detail depends on it. */
export interface RequestFacts {
  /** GET, HEAD or OPTIONS: it changes nothing. */
  safe: boolean;
  /** Sent with an Idempotency-Key: it ran in one transaction, rolled back on a failure (docs/api-guide.md#safe-retries). */
  keyed: boolean;
}

/** What an overloaded instance says (the admission's prebuilt refusal says the same). */
export const OVERLOADED_DETAIL = 'The service is overloaded and did not start this request. Retry later.';

const TOO_BUSY = 'The database was too busy to answer in time';

/**
 * A statement refused after waiting past DATABASE_QUEUE_TIMEOUT_MS was not sent; what is true of
 * the request's other statements depends on the request (docs/api-guide.md#errors). A keyed
 * request's first statement is its transaction's BEGIN, and whatever it did is rolled back. The
 * service does not follow which statements belong to which request, so of an unkeyed write it
 * can only say that earlier ones may have run.
 */
function queueTimeoutDetail({ safe, keyed }: RequestFacts): string {
  if (keyed)
    return `${TOO_BUSY}: this request did not start, and nothing of it was kept. Retry later with the same Idempotency-Key.`;
  const refused = `${TOO_BUSY}: a statement of this request waited too long for the database and was not sent`;
  if (safe) return `${refused}. A read changes nothing: retry later.`;
  return `${refused}, and statements of it sent before may have run. Check what was done before retrying; a request sent with an Idempotency-Key can be retried safely.`;
}

/** Seconds before a retry after a refusal for overload: 1 to 5, so that clients do not retry in step. */
export function overloadRetryAfter(): number {
  return 1 + Math.floor(Math.random() * 5);
}

const retryLater = () => ({ 'retry-after': String(RETRY_AFTER_SECONDS) });
const conflictingField = (e: Conflict) =>
  e.conflictingField === undefined ? {} : { conflictingField: e.conflictingField };

export const ERRORS: { [C in DomainErrorCode]: ErrorEntry<ErrorOf[C]> } = {
  ENTITY_NOT_FOUND: {
    type: 'entity-not-found',
    forms: {
      'orders-v1': (e) =>
        e.entity === 'Order' ? { title: 'Order not found', extensions: { orderId: e.id } } : undefined,
    },
  },
  CONFLICT: {
    type: 'conflict',
    extensions: conflictingField,
    forms: { 'users-v1': () => ({ title: 'Conflict' }), 'orders-v1': () => ({ title: 'Conflict' }) },
  },
  ORDER_ALREADY_CANCELLED: {
    type: 'conflict',
    forms: {
      'users-v1': () => ({ title: 'Order already cancelled' }),
      'orders-v1': () => ({ title: 'Order already cancelled' }),
    },
  },
  INVALID_ORDER_STATE: {
    type: 'conflict',
    extensions: (e) => ({ currentStatus: e.currentStatus }),
    forms: {
      'users-v1': () => ({ title: 'Invalid order state' }),
      'orders-v1': () => ({ title: 'Invalid order state' }),
    },
  },
  BUSINESS_RULE_VIOLATION: { type: 'business-rule-violation', extensions: (e) => e.extensions },
  // docs/api-guide.md#authentication-and-scopes: RFC 6750 challenges on 401 and 403.
  UNAUTHENTICATED: {
    type: 401,
    headers: (e) => ({ 'www-authenticate': e.tokenRejected ? 'Bearer error="invalid_token"' : 'Bearer' }),
  },
  FORBIDDEN: {
    type: 403,
    headers: (e) => ({ 'www-authenticate': `Bearer error="insufficient_scope", scope="${e.scope}"` }),
  },
  PRECONDITION_FAILED: { type: 412, headers: (e) => ({ etag: `"${e.currentVersion}"` }) },
  TOO_MANY_REQUESTS: { type: 429, headers: (e) => ({ 'retry-after': String(e.retryAfterSeconds) }) },
  // docs/api-guide.md#safe-retries: about the key, not the resource, so about:blank in every form.
  INVALID_IDEMPOTENCY_KEY: { type: 400 },
  IDEMPOTENCY_KEY_IN_USE: { type: 409, headers: () => ({ 'retry-after': '1' }) },
  IDEMPOTENCY_KEY_REUSED: { type: 422 },
  // As a schema's validation error (to-problem.ts validationProblem), for one field.
  INVALID_FIELD: {
    type: 'validation-failed',
    detail: () => 'Validation failed',
    extensions: (e) => ({ fieldErrors: [{ field: e.field, message: e.message }] }),
    forms: {
      'users-v1': (e) => ({
        title: 'Validation Error',
        extensions: { errors: [{ field: e.field, message: e.message, rejected: null }] },
      }),
      'orders-v1': (e) => ({ title: 'Bad Request', extensions: { errors: [`${e.field}: ${e.message}`] } }),
    },
  },
  DATABASE_UNAVAILABLE: {
    type: 503,
    detail: () => 'The service cannot reach its database. Retry later.',
    headers: retryLater,
  },
  OVERLOADED: {
    type: 'overloaded',
    detail: (e, request) =>
      e.reason === 'busy'
        ? 'The instance has requests in flight for longer than it can answer in time. Retry later.'
        : e.reason === 'queue'
          ? queueTimeoutDetail(request)
          : OVERLOADED_DETAIL,
    headers: () => ({ 'retry-after': String(overloadRetryAfter()) }),
  },
  REQUEST_TIMED_OUT: {
    type: 503,
    detail: () => 'The request took too long and was stopped. Retry later.',
    headers: retryLater,
  },
};

/** The row of an error's code. */
export function errorEntry(error: DomainError): ErrorEntry<DomainError> {
  return ERRORS[error.code] as ErrorEntry<DomainError>;
}
