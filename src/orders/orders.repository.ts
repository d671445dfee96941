// SQL for orders and their items.
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { prepare, prepareVariants } from '../db/prepared.js';
import type { OrderStatus } from './order-status.js';
import type { NewOrderRow, OrderItemRow, OrderRow, OrdersTable } from './orders.table.js';

/** Which orders a caller may see: all (admin), or one customer's. */
export type Visibility = { customerId: number | undefined } | 'all';

/** The API's sort fields and their columns; the wire schema offers exactly these (tsc checks). */
const SORT_COLUMNS = { id: 'id', createdAt: 'created_at', total: 'total', status: 'status' } as const satisfies Record<
  string,
  keyof OrdersTable
>;
export type OrderSort = keyof typeof SORT_COLUMNS;

const selectOrder = prepare(1, (db, id: number) => db.selectFrom('orders').selectAll().where('id', '=', id));
const selectCustomerOrder = prepare(2, (db, id: number, customerId: number) =>
  db.selectFrom('orders').selectAll().where('id', '=', id).where('customer_id', '=', customerId),
);

/** The order, if it exists and the caller may see it. */
export async function findOrder(db: Db, id: number, visibility: Visibility): Promise<OrderRow | undefined> {
  const rows =
    visibility === 'all' ? await selectOrder(db, id) : await selectCustomerOrder(db, id, visibility.customerId ?? -1);
  return rows[0];
}

/** As findOrder, and locks the row until the transaction ends. */
export function lockOrder(
  trx: Transaction<Database>,
  id: number,
  visibility: Visibility,
): Promise<OrderRow | undefined> {
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

/** Each product of the order and its quantity (one line per product). */
export function findOrderLines(db: Db, orderId: number): Promise<{ productId: number; quantity: number }[]> {
  return db
    .selectFrom('order_items')
    .select(['product_id as productId', 'quantity'])
    .where('order_id', '=', orderId)
    .execute();
}

export function updateOrder(
  db: Db,
  id: number,
  changes: Partial<
    Pick<OrderRow, 'status' | 'note' | 'shipping_street' | 'shipping_postal_code' | 'cancellation_reason'>
  >,
): Promise<OrderRow> {
  return db
    .updateTable('orders')
    .set({ ...changes, version: sql<number>`version + 1`, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteOrderById(db: Db, id: number): Promise<void> {
  await db.deleteFrom('orders').where('id', '=', id).execute();
}

export interface OrderListParams extends Filters {
  sort: OrderSort;
  direction: 'asc' | 'desc';
  offset: number;
  limit: number;
}

type Filters = { status?: OrderStatus; customerId?: number; visibility: Visibility };

/** The variant key of a filter set: which filters are present, not their values. */
function filterKey(p: Filters): string {
  return `${p.status !== undefined ? 's' : '-'}${p.customerId !== undefined ? 'c' : '-'}${p.visibility === 'all' ? 'a' : 'v'}`;
}

function filtered(db: Kysely<Database>, key: string, status: OrderStatus, customerId: number, visibleTo: number) {
  let query = db.selectFrom('orders');
  if (key[0] === 's') query = query.where('status', '=', status);
  if (key[1] === 'c') query = query.where('customer_id', '=', customerId);
  if (key[2] === 'v') query = query.where('customer_id', '=', visibleTo);
  return query;
}

const selectOrderPage = prepareVariants(5, (key: string) => {
  const [filters, sort, direction] = key.split(',') as [string, OrderSort, 'asc' | 'desc'];
  const column = SORT_COLUMNS[sort];
  return (db, status: OrderStatus, customerId: number, visibleTo: number, limit: number, offset: number) => {
    let page = filtered(db, filters, status, customerId, visibleTo).selectAll().orderBy(column, direction);
    if (column !== 'id') page = page.orderBy('id', direction);
    return page.limit(limit).offset(offset);
  };
});

const countOrders = prepareVariants(
  3,
  (filters: string) => (db, status: OrderStatus, customerId: number, visibleTo: number) =>
    filtered(db, filters, status, customerId, visibleTo).select((eb) => eb.fn.countAll<number>().as('count')),
);

/** A page and the total under the same filters, sent together (pipelined on PostgreSQL). */
export async function listOrders(db: Db, p: OrderListParams): Promise<{ rows: OrderRow[]; total: number }> {
  const filters = filterKey(p);
  const values = [
    p.status ?? 'PENDING',
    p.customerId ?? -1,
    p.visibility === 'all' ? -1 : (p.visibility.customerId ?? -1),
  ] as const;
  const [rows, [counted]] = await Promise.all([
    selectOrderPage(`${filters},${p.sort},${p.direction}`, db, ...values, p.limit, p.offset),
    countOrders(filters, db, ...values),
  ]);
  return { rows, total: counted?.count ?? 0 };
}
