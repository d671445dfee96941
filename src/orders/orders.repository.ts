// SQL for orders and their items: point reads, changes and lists (placing an order is in
// placement.repository.ts).
import { sql } from 'kysely';
import type { Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { compilable, prepare, prepareVariants, type Statement } from '../db/prepared.js';
import { anyOf, prepareById } from '../db/prepared-by-id.js';
import { pageAndTotal, pageMode, pageQuery, type PageMode } from '../db/keyset.js';
import { countOf } from '../db/row-counts.js';
import type { Seek, SortDirection } from '../page.js';
import type { OrderStatus } from './order-status.js';
import type { OrderItemRow, OrderRow, OrdersTable } from './orders.table.js';

/** Which orders a caller may see: all (admin), or one customer's. */
export type Visibility = { customerId: number | undefined } | 'all';

/** The API's sort fields and their columns; the wire schema offers exactly these (tsc checks). */
const SORT_COLUMNS = { id: 'id', createdAt: 'created_at', total: 'total', status: 'status' } as const satisfies Record<
  string,
  keyof OrdersTable
>;
export type OrderSort = keyof typeof SORT_COLUMNS;
const COLUMN_TYPES = { id: 'bigint', created_at: 'timestamptz', total: 'numeric', status: 'text' } as const;

const selectOrder = prepareById(
  prepare(1, (db, id: number) => db.selectFrom('orders').selectAll().where('id', '=', id), {
    warmUp: [0],
    repeatable: true,
  }),
  prepare(1, (db, ids: string) => db.selectFrom('orders').selectAll().where('id', '=', anyOf(ids)), {
    warmUp: ['0'],
    repeatable: true,
  }),
);
const selectCustomerOrder = prepare(
  2,
  (db, id: number, customerId: number) =>
    db.selectFrom('orders').selectAll().where('id', '=', id).where('customer_id', '=', customerId),
  { warmUp: [0, 0], repeatable: true },
);

/**
 * The order, if it exists and the caller may see it. `gone`: true once the read's client has hung
 * up; an admin's read still waiting for its gathered statement is then not sent.
 */
export async function findOrder(
  db: Db,
  id: number,
  visibility: Visibility,
  gone?: () => boolean,
): Promise<OrderRow | undefined> {
  const rows =
    visibility === 'all'
      ? await selectOrder(db, id, gone)
      : await selectCustomerOrder(db, id, visibility.customerId ?? -1);
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
  direction: SortDirection;
  offset: number;
  limit: number;
  seek?: Seek | undefined;
}

type Filters = { status?: OrderStatus; customerId?: number; visibility: Visibility };

export type OrderListRow = OrderRow & { sort_key: string };

/** The variant key of a filter set: which filters are present, not their values. */
function filterKey(p: Filters): string {
  return `${p.status !== undefined ? 's' : '-'}${p.customerId !== undefined ? 'c' : '-'}${p.visibility === 'all' ? 'a' : 'v'}`;
}

/** The filters of a variant as one SQL condition (undefined: none). */
function filterCondition(key: string, status: unknown, customerId: unknown, visibleTo: unknown) {
  const conditions = [];
  if (key[0] === 's') conditions.push(sql`status = ${status}`);
  if (key[1] === 'c') conditions.push(sql`customer_id = ${customerId}`);
  if (key[2] === 'v') conditions.push(sql`customer_id = ${visibleTo}`);
  return conditions.length === 0 ? undefined : sql.join(conditions, sql` and `);
}

const ORDER_COLUMNS = [
  'id',
  'customer_id',
  'status',
  'total',
  'item_count',
  'note',
  'shipping_street',
  'shipping_postal_code',
  'cancellation_reason',
  'version',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof OrdersTable)[];

const selectOrderPage = prepareVariants(
  7,
  (key: string) => {
    const [filters, sort, direction, mode] = key.split(',') as [string, OrderSort, SortDirection, PageMode];
    // Ties are broken by id in the sort's direction (docs/api-guide.md#orders).
    const column = SORT_COLUMNS[sort];
    const order = { column, type: COLUMN_TYPES[column], direction, idDirection: direction };
    return (
      db,
      status: OrderStatus,
      customerId: number,
      visibleTo: number,
      limit: number,
      offset: number,
      seekValue: string | undefined,
      seekId: number | undefined,
    ) =>
      compilable<OrderListRow>(
        db,
        pageQuery({
          table: 'orders',
          columns: ORDER_COLUMNS,
          filters: filterCondition(filters, status, customerId, visibleTo),
          order,
          mode,
          limit,
          offset,
          seekValue,
          seekId,
        }),
      );
  },
  { repeatable: true },
);

/**
 * The total under the filters: all orders and each status's come from the counters the
 * triggers keep (migration 0008); one customer's are counted through its index.
 */
const countOrders = prepareVariants(
  3,
  (filters: string) => {
    if (filters === '--a') return (db) => compilable<{ count: number }>(db, countOf('orders'));
    if (filters === 's-a')
      return (db, status: OrderStatus) => compilable<{ count: number }>(db, countOf(sql`'orders:' || ${status}`));
    return (db, status: OrderStatus, customerId: number, visibleTo: number) =>
      compilable<{ count: number }>(
        db,
        sql`select count(*) as count from orders where ${filterCondition(filters, status, customerId, visibleTo) ?? sql`true`}`,
      );
  },
  { repeatable: true },
);

/** A page and the total under the same filters (db/keyset.ts pageAndTotal). */
export async function listOrders(db: Db, p: OrderListParams): Promise<{ rows: OrderListRow[]; total: number }> {
  return pageAndTotal(
    p,
    async () => (await countOrders(...countArgs(db, p)))[0]?.count ?? 0,
    (mode, limit, offset) => selectOrderPage(...pageArgs(db, p, mode, limit, offset)),
  );
}

/** The statements listOrders sends (test/lists/list-plans.test.ts explains them). */
export function orderListStatements(
  db: Db,
  p: OrderListParams,
  mode = pageMode(p.seek),
): { page: Statement; count: Statement } {
  return {
    page: selectOrderPage.statement(...pageArgs(db, p, mode, p.limit, p.offset)),
    count: countOrders.statement(...countArgs(db, p)),
  };
}

/** The filters' values, in the prepared queries' order (unused ones are never bound). */
function filterValues(p: Filters) {
  return [
    p.status ?? 'PENDING',
    p.customerId ?? -1,
    p.visibility === 'all' ? -1 : (p.visibility.customerId ?? -1),
  ] as const;
}

function pageArgs(db: Db, p: OrderListParams, mode: PageMode, limit: number, offset: number) {
  const key = `${filterKey(p)},${p.sort},${p.direction},${mode}`;
  return [key, db, ...filterValues(p), limit, offset, p.seek?.value, p.seek?.id] as const;
}

function countArgs(db: Db, p: OrderListParams) {
  return [filterKey(p), db, ...filterValues(p)] as const;
}
