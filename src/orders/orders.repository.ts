// SQL for orders and their items.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Transaction } from 'kysely';
import type { Database, Db } from '../db/database.js';
import { compilable, prepare, prepareVariants, type Statement } from '../db/prepared.js';
import { pageAndTotal, pageMode, pageQuery, type PageMode } from '../db/keyset.js';
import { countOf } from '../db/row-counts.js';
import type { Seek, SortDirection } from '../page.js';
import { newDeliveries, recordedDeliveries, recordEventWith, type NewDeliveries } from '../events/index.js';
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

const selectOrder = prepare(1, (db, id: number) => db.selectFrom('orders').selectAll().where('id', '=', id), {
  warmUp: [0],
});
const selectCustomerOrder = prepare(
  2,
  (db, id: number, customerId: number) =>
    db.selectFrom('orders').selectAll().where('id', '=', id).where('customer_id', '=', customerId),
  { warmUp: [0, 0] },
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

/** placeStatement's one row: the order's columns are all null when it was not placed. */
type PlacementRow = { customer_found: boolean; stock: string | null; deliveries: string | null } & (
  OrderRow | { [K in keyof OrderRow]: null }
);

/** What placing an order did: the order, or why there is none. */
export interface Placement {
  /** The customer exists. */
  customerFound: boolean;
  /** Each line's product that has a stock row, and the units it had available. */
  available: Map<number, number>;
  /** The order, when placed: the customer exists and every line had the units. */
  order: OrderRow | undefined;
  /** The webhook deliveries its `order.created` event queued. */
  deliveries: NewDeliveries;
}

/**
 * The v1 representation of the order in `o` as JSON text, byte for byte what the response
 * schema serializes for it (test/events-outbox.test.ts compares them): members in the schema's
 * order, the total without trailing zeros (a JSON number), instants to the millisecond in UTC.
 */
const orderV1Json = (o: string) => {
  const t = sql.table(o);
  const text = (column: string) => sql`coalesce(to_json(${sql.ref(`${o}.${column}`)})::text, 'null')`;
  const instant = (column: string) =>
    sql`'"' || to_char(${sql.ref(`${o}.${column}`)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"'`;
  return sql<string>`'{"id":' || ${t}.id || ',"customerId":' || ${t}.customer_id
    || ',"status":' || to_json(${t}.status)::text || ',"total":' || trim_scale(${t}.total)::text
    || ',"note":' || ${text('note')}
    || ',"shippingAddress":' || case when ${t}.shipping_street is null or ${t}.shipping_postal_code is null then 'null'
         else '{"street":' || to_json(${t}.shipping_street)::text
           || ',"postalCode":' || to_json(${t}.shipping_postal_code)::text || '}' end
    || ',"cancellationReason":' || ${text('cancellation_reason')}
    || ',"createdAt":' || ${instant('created_at')} || ',"updatedAt":' || ${instant('updated_at')} || '}'`;
};

/**
 * Places an order in one statement, so in one round trip and atomically without a transaction
 * of its own (DESIGN §5): finds the customer, locks every line's stock row in product order (two
 * orders of the same products cannot deadlock), and only when the customer exists and every
 * line has the units reserves them all, inserts the order with its exact total (numeric) and its
 * items with each product's name and price at this moment, and records `order.created` with its
 * webhook deliveries. Otherwise it writes nothing, and says why. `productIds` and `quantities`
 * are the lines in product order, each product once, comma-separated; line numbers follow it.
 */
const placeStatement = prepare(
  7,
  (
    db,
    customerId: number,
    productIds: string,
    quantities: string,
    lineCount: number,
    eventId: string,
    at: Date,
    leaseMs: number | null,
  ) =>
    compilable<PlacementRow>(
      db,
      sql`
      with customer as (select exists (select 1 from users where id = ${customerId}::bigint) as found),
      wanted as (
        select w.product_id, w.quantity, w.line_no::int as line_no
          from unnest(string_to_array(${productIds}, ',')::bigint[], string_to_array(${quantities}, ',')::int[])
               with ordinality as w(product_id, quantity, line_no)
      ),
      locked as materialized (
        select s.product_id, s.available from stock s, customer c
         where c.found and s.product_id in (select product_id from wanted)
         order by s.product_id
           for update of s
      ),
      verdict as (
        select count(*) = ${lineCount}::bigint as ok
          from locked l join wanted w on w.product_id = l.product_id
         where l.available >= w.quantity
      ),
      reserved as (
        update stock s
           set available = s.available - w.quantity, reserved = s.reserved + w.quantity, updated_at = now()
          from locked l join wanted w on w.product_id = l.product_id, verdict v
         where v.ok and s.product_id = l.product_id
        returning s.product_id, w.quantity, w.line_no
      ),
      lines as (
        select r.line_no, r.product_id, p.name, p.price, r.quantity
          from reserved r join products p on p.id = r.product_id
      ),
      placed as (
        insert into orders (customer_id, status, total, item_count)
        select ${customerId}::bigint, 'PENDING', sum(l.price * l.quantity), count(*) from lines l
        having count(*) = ${lineCount}::bigint
        returning *
      ),
      items as (
        insert into order_items (order_id, line_no, product_id, product_name, quantity, unit_price)
        select o.id, l.line_no, l.product_id, l.name, l.quantity, l.price from placed o, lines l
      ),
      ${recordEventWith('placed', {
        id: eventId,
        type: 'order.created',
        time: at,
        subject: sql<string>`'orders/' || placed.id`,
        data: orderV1Json('placed'),
        owner: sql<number>`placed.customer_id`,
        leaseMs,
      })}
      select c.found as customer_found,
             (select string_agg(product_id || ':' || available, ',') from locked) as stock,
             ${recordedDeliveries()} as deliveries,
             o.*
        from customer c left join placed o on true`,
    ),
  {
    // Row locks and a dozen index entries: not in the reads' pipeline (db/postgres-pool.ts).
    spread: true,
    // No customer 0: nothing is locked, no line is reserved, `placed` has no row (one line was
    // wanted, none reserved), so no order, item, event or delivery is written and no count moves.
    warmUp: [0, '0', '1', 1, '00000000-0000-0000-0000-000000000000', new Date(0), null],
  },
);

export async function placeOrderRows(
  db: Db,
  customerId: number,
  lines: readonly (readonly [productId: number, quantity: number])[],
  leaseMs: number | null,
): Promise<Placement> {
  const [row] = await placeStatement(
    db,
    customerId,
    lines.map(([productId]) => productId).join(','),
    lines.map(([, quantity]) => quantity).join(','),
    lines.length,
    randomUUID(),
    new Date(),
    leaseMs,
  );
  if (row === undefined) throw new Error('placing an order returned no row');
  const { customer_found: customerFound, stock, deliveries, ...order } = row;
  const available = new Map<number, number>();
  for (const entry of stock?.split(',') ?? []) {
    const [productId, units] = entry.split(':');
    available.set(Number(productId), Number(units));
  }
  return {
    customerFound,
    available,
    order: order.id === null ? undefined : order,
    deliveries: newDeliveries(deliveries),
  };
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

const selectOrderPage = prepareVariants(7, (key: string) => {
  const [filters, sort, direction, mode] = key.split(',') as [string, OrderSort, SortDirection, PageMode];
  // Ties are broken by id in the sort's direction (DESIGN §5).
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
});

/**
 * The total under the filters: all orders and each status's come from the counters the
 * triggers keep (migration 0008); one customer's are counted through its index.
 */
const countOrders = prepareVariants(3, (filters: string) => {
  if (filters === '--a') return (db) => compilable<{ count: number }>(db, countOf('orders'));
  if (filters === 's-a')
    return (db, status: OrderStatus) => compilable<{ count: number }>(db, countOf(sql`'orders:' || ${status}`));
  return (db, status: OrderStatus, customerId: number, visibleTo: number) =>
    compilable<{ count: number }>(
      db,
      sql`select count(*) as count from orders where ${filterCondition(filters, status, customerId, visibleTo) ?? sql`true`}`,
    );
});

/** A page and the total under the same filters (db/keyset.ts pageAndTotal). */
export async function listOrders(db: Db, p: OrderListParams): Promise<{ rows: OrderListRow[]; total: number }> {
  return pageAndTotal(
    p,
    async () => (await countOrders(...countArgs(db, p)))[0]?.count ?? 0,
    (mode, limit, offset) => selectOrderPage(...pageArgs(db, p, mode, limit, offset)),
  );
}

/** The statements listOrders sends (test/list-plans.test.ts explains them). */
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
