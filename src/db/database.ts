import { DatabaseUnavailable } from '../errors.js';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { OrderItemsTable, OrdersTable } from '../orders/orders.table.js';
import type { ProductsTable, StockTable } from '../products/products.table.js';
import type { PasswordResetsTable, UsersTable } from '../users/users.table.js';
import type { IdempotencyKeysTable } from './idempotency-keys.js';
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

/** One round trip to the database (readiness, DESIGN §8); throws when it cannot be reached. */
/**
 * Asks the database for `select 1`. A database that does not answer within `withinMs` (no
 * primary during a failover: the driver waits for one) is unavailable now: a load balancer's
 * probe gets its 503 at once instead of hanging.
 */
export async function pingDatabase(db: Db, withinMs = 2000): Promise<void> {
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
