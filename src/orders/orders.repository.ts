// SQL for orders and their items.
import { sql } from 'kysely';
import type { Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { prepare } from '../db/prepared.js';
import type { OrderStatus } from './order-status.js';
import type { OrderSortField } from './orders.schemas.js';
import type { NewOrderRow, OrderItemRow, OrderRow, OrdersTable } from './orders.table.js';

/** Which orders a caller may see: all (admin), or one customer's. */
export type Visibility = { customerId: number | undefined } | 'all';

const SORT_COLUMNS = { id: 'id', createdAt: 'created_at', total: 'total', status: 'status' } as const satisfies Record<OrderSortField, keyof OrdersTable>;

const selectOrder = prepare(1, (db, id: number) => db.selectFrom('orders').selectAll().where('id', '=', id));
const selectCustomerOrder = prepare(2, (db, id: number, customerId: number) => db.selectFrom('orders').selectAll().where('id', '=', id).where('customer_id', '=', customerId));

/** The order, if it exists and the caller may see it. */
export async function findOrder(db: Db, id: number, visibility: Visibility): Promise<OrderRow | undefined> {
  const rows = visibility === 'all' ? await selectOrder(db, id) : await selectCustomerOrder(db, id, visibility.customerId ?? -1);
  return rows[0];
}

/** As findOrder, and locks the row until the transaction ends. */
export function lockOrder(trx: Transaction<Database>, id: number, visibility: Visibility): Promise<OrderRow | undefined> {
  let query = trx.selectFrom('orders').selectAll().where('id', '=', id);
  if (visibility !== 'all') query = query.where('customer_id', '=', visibility.customerId ?? -1);
  return query.forUpdate().executeTakeFirst();
}

export function insertOrder(db: Db, row: NewOrderRow): Promise<OrderRow> {
  return db.insertInto('orders').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function insertOrderItems(db: Db, items: OrderItemRow[]): Promise<void> {
  await db.insertInto('order_items').values(items).execute();
}

export function findOrderItems(db: Db, orderId: number): Promise<OrderItemRow[]> {
  return db.selectFrom('order_items').selectAll().where('order_id', '=', orderId).orderBy('line_no').execute();
}

export function updateOrder(
  db: Db,
  id: number,
  changes: Partial<Pick<OrderRow, 'status' | 'note' | 'shipping_street' | 'shipping_postal_code' | 'cancellation_reason'>>,
): Promise<OrderRow> {
  return db
    .updateTable('orders')
    .set({ ...changes, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteOrderById(db: Db, id: number): Promise<void> {
  await db.deleteFrom('orders').where('id', '=', id).execute();
}

export interface OrderListParams {
  status?: OrderStatus;
  customerId?: number;
  visibility: Visibility;
  sort: OrderSortField;
  direction: 'asc' | 'desc';
  offset: number;
  limit: number;
}

/** A page and the total under the same filters, sent together (pipelined on PostgreSQL). */
export async function listOrders(db: Db, p: OrderListParams): Promise<{ rows: OrderRow[]; total: number }> {
  let filtered = db.selectFrom('orders');
  if (p.status !== undefined) filtered = filtered.where('status', '=', p.status);
  if (p.customerId !== undefined) filtered = filtered.where('customer_id', '=', p.customerId);
  if (p.visibility !== 'all') filtered = filtered.where('customer_id', '=', p.visibility.customerId ?? -1);
  const column = SORT_COLUMNS[p.sort];
  let page = filtered.selectAll().orderBy(column, p.direction);
  if (column !== 'id') page = page.orderBy('id', p.direction);
  const [rows, { count }] = await Promise.all([
    page.limit(p.limit).offset(p.offset).execute(),
    filtered.select((eb) => eb.fn.countAll<number>().as('count')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(count) };
}
