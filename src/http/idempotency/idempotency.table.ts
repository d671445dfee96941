// idempotency_keys: the stored outcome of each request sent with an Idempotency-Key, by the
// caller's subject and the key, until it expires (IDEMPOTENCY_TTL_HOURS).
import type { Generated } from 'kysely';

export interface IdempotencyKeysTable {
  subject: string;
  key: string;
  fingerprint: string;
  status: number;
  /** A JSON object of the stored response headers. */
  headers: string;
  body: string | null;
  created_at: Generated<Date>;
  expires_at: Date;
}
