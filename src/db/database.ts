import { DatabaseUnavailable } from '../errors.js';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { OrderItemsTable, OrdersTable } from '../orders/orders.table.js';
import type { ProductsTable, StockTable } from '../products/products.table.js';
import type { PasswordResetsTable, UsersTable } from '../users/users.table.js';
import type { IdempotencyKeysTable } from '../http/idempotency/idempotency.table.js';
import type { EventsTable } from '../events/events.table.js';
import type { WebhookSubscriptionsTable } from '../webhooks/webhooks.table.js';
import type { WebhookDeliveriesTable } from '../webhooks/deliveries.table.js';

/** Every table the service owns, by its SQL name (snake_case; the API is camelCase). */
export interface Database {
  users: UsersTable;
  password_resets: PasswordResetsTable;
  products: ProductsTable;
  stock: StockTable;
  orders: OrdersTable;
  order_items: OrderItemsTable;
  idempotency_keys: IdempotencyKeysTable;
  events: EventsTable;
  webhook_subscriptions: WebhookSubscriptionsTable;
  webhook_deliveries: WebhookDeliveriesTable;
}

/** A repository's first argument: the database, or the transaction it must run inside. */
export type Db = Kysely<Database> | Transaction<Database>;

/** Whether a database answered a statement just now (its pool knows: PostgresPool.answeredWithin). */
const answeredRecently = new WeakMap<object, (withinMs: number) => boolean>();

export function trackAnswers(db: Db, answeredWithin: (withinMs: number) => boolean): void {
  answeredRecently.set(db, answeredWithin);
}

/**
 * Whether the database can be reached (readiness, docs/operations.md#running-several-instances); throws DatabaseUnavailable when
 * not. A database that answered one of the service's own statements in the last `freshMs`, with
 * no connection lost since, is reachable without asking again: under load a probe's `select 1`
 * would wait behind the requests' statements and could miss its deadline while every one of
 * them is answered. Otherwise it asks for `select 1`; a database that does not answer within
 * `withinMs` (no primary during a failover: the driver waits for one) is unavailable now: a
 * load balancer's probe gets its 503 at once instead of hanging.
 */
/** How long readiness waits for the database's answer (deploy/kubernetes/ sets its probe's time-out above it). */
export const READY_WITHIN_MS = 2000;

export async function pingDatabase(db: Db, withinMs = READY_WITHIN_MS, freshMs = 1000): Promise<void> {
  if (answeredRecently.get(db)?.(freshMs) === true) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseUnavailable()), withinMs);
  });
  try {
    await Promise.race([sql`select 1`.execute(db), late]);
  } finally {
    clearTimeout(timer);
  }
}
