import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

export interface WebhookSubscriptionsTable {
  id: Generated<number>;
  url: string;
  /** Exact event types, `user.*`, `order.*` or `*`. */
  events: string[];
  description: string | null;
  enabled: Generated<boolean>;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  created_at: ColumnType<Date, never, never>;
  updated_at: ColumnType<Date, never, Date>;
}

export type WebhookSubscriptionRow = Selectable<WebhookSubscriptionsTable>;
export type NewWebhookSubscriptionRow = Insertable<WebhookSubscriptionsTable>;
