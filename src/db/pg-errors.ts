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
// connections) and the socket-level codes postgres.js reports when the server is gone.
const CONNECTION_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH',
  'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT',
  '57P01', '57P02', '57P03', '53300',
]);

export function isConnectionError(error: unknown): boolean {
  const code = (error as PgError | null)?.code;
  return typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08'));
}
