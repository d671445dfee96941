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
export async function pingDatabase(db: Db): Promise<void> {
  await sql`select 1`.execute(db);
}
