// SQLSTATE and driver codes → meaning. Repositories use these to turn driver errors into
// domain errors at the boundary (STYLE principle 5).

interface PgError {
  code?: unknown;
  constraint_name?: unknown; // postgres.js
  constraint?: unknown; // PGlite
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as PgError | null;
  if (e?.code !== '23505') return false;
  return constraint === undefined || e.constraint_name === constraint || e.constraint === constraint;
}

// Class 08 (connection exception), 57P01-3 (shutdown, cannot connect now), 53300 (too many
// connections), 25006 (read-only: not the primary), the socket-level codes postgres.js reports
// when the server is gone, and the pool's own (CONNECTION_UNANSWERED: no answer in time).
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'CONNECTION_UNANSWERED',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  // A write reached a server that accepts none: a standby, or a primary being demoted (failover).
  '25006',
]);

/** The database cannot serve the statement now: 503 with Retry-After (docs/api-guide.md#errors). */
export function isConnectionError(error: unknown): boolean {
  const code = (error as PgError | null)?.code;
  return typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08'));
}

/**
 * The connection the statement failed on is over: every statement on it settles now. A
 * read-only refusal (25006) comes from a live server that answers the statements pipelined
 * with it, so it ends nothing at once (the connection retires once they are answered).
 */
export function endsConnection(error: unknown): boolean {
  return isConnectionError(error) && (error as PgError).code !== '25006';
}

// SQLSTATEs caused by a value the database cannot hold (class 22): a NUL or untranslatable
// character, a number or date out of range, a string too long. The request's fault, never a 500.
const DATA_EXCEPTIONS = new Set(['22001', '22003', '22008', '22021', '22P05']);

export function isDataException(error: unknown): boolean {
  const code = (error as PgError | null)?.code;
  return typeof code === 'string' && DATA_EXCEPTIONS.has(code);
}

// A statement cancelled by statement_timeout (57014), a session ended for idling in a
// transaction (25P03), a lock not granted in time (55P03): the database is slow, not the request
// wrong. docs/api-guide.md#limits-and-time-outs: 503 with Retry-After.
const TIMEOUTS = new Set(['57014', '25P03', '55P03']);

export function isDatabaseTimeout(error: unknown): boolean {
  const code = (error as PgError | null)?.code;
  return typeof code === 'string' && TIMEOUTS.has(code);
}

/**
 * An error one row of a statement can cause, so one of several orders placed together: a value
 * (class 22), a constraint (23), or a deadlock or serialization failure (40). Not one that every
 * row would meet (a connection lost, a timeout, a bug in the SQL).
 */
export function isRowError(error: unknown): boolean {
  const code = (error as PgError | null)?.code;
  return typeof code === 'string' && /^(22|23|40)[0-9A-Z]{3}$/.test(code);
}
