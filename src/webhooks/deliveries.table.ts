import type { ColumnType, Generated } from 'kysely';

/** One event for one subscription (migration 0011). */
export interface WebhookDeliveriesTable {
  id: Generated<number>;
  subscription_id: number;
  event_sequence: number;
  subject: string;
  /** pending (not yet sent, or being sent), failed (to be retried), delivered, dead. */
  status: Generated<'pending' | 'delivered' | 'failed' | 'dead'>;
  attempts: Generated<number>;
  next_attempt_at: Generated<Date>;
  leased_until: Date | null;
  last_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  /** The leases given so far (migration 0020): an attempt's outcome is recorded only under its own. */
  fencing_token: Generated<number>;
  /** A redelivery was asked while an attempt was open: pending again once that one ends. */
  redelivery_asked: Generated<boolean>;
  /** Attempts made before the last redelivery reset `attempts` (migration 0022); the API shows the sum. */
  attempts_before: Generated<number>;
  created_at: ColumnType<Date, never, never>;
}
