// Placing orders: one statement that checks the customer, reserves every line's stock, inserts
// the order with its items and records its event with its webhook deliveries, atomically and in
// one round trip; and the group commit that lets the orders arriving together share it.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { Batcher } from '../db/batcher.js';
import { isRowError } from '../db/pg-errors.js';
import { compilable, connectionCount, prepare, queueTimeoutOf } from '../db/prepared.js';
import { Overloaded } from '../errors.js';
import type { Db } from '../db/database.js';
import {
  deliveriesOfStatement,
  eventFanOut,
  fanOutArgument,
  fanOutFromArgument,
  recordEventWith,
  writtenDeliveries,
  type FanOut,
  type NewDeliveries,
} from '../events/index.js';
import type { Span } from '@opentelemetry/api';
import { spanOfDb, tracedDb, untraced } from '../tracing/db-spans.js';
import { traceparentOf } from '../tracing/tracing.js';
import type { OrderRow } from './orders.table.js';

/** placeStatement's row for each order: the order's columns are all null when it was not placed. */
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
 * schema serializes for it (test/events/events-outbox.test.ts compares them): members in the schema's
 * order, the total without trailing zeros (a JSON number), instants to the millisecond in UTC.
 */
const orderV1JsonSql = (o: string) => {
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
 * Places orders in one statement, so in one round trip and atomically without a transaction of
 * its own (docs/api-guide.md#orders), as if they were placed one after another in their order: one statement's
 * cost for all of them (db/batcher.ts). For each order it finds the customer, locks every line's
 * stock row (all of them in product order, so two statements cannot deadlock), and only when the
 * customer exists and every line has the units reserves them, inserts the order with its exact
 * total (numeric) and its items with each product's name and price at this moment, and records
 * `order.created` with its webhook deliveries. Otherwise it writes nothing for that order, and
 * says why. An order's units must be there after every earlier order of the statement that
 * could be placed on its own, placed or not: a running total that needs no recursion, and so
 * errs only on the side of not placing (placeOrders places such an order alone afterwards).
 * `customerIds` and `eventIds` have one entry per order; `lineOrders` (1-based), `productIds`
 * and `quantities` one per line, each order's lines in product order, each product once. One
 * row per order, in their order; the locked stock and the deliveries on the first row only.
 */
const placeStatement = prepare(
  8,
  (
    db,
    customerIds: string,
    eventIds: string,
    lineOrders: string,
    productIds: string,
    quantities: string,
    at: Date,
    fanOut: number | null,
    traceContexts: string | null,
  ) =>
    compilable<PlacementRow>(
      db,
      sql`
      with req as (
        select r.ord::int as ord, r.customer_id, r.event_id, nullif(r.trace_context, '') as trace_context,
               exists (select 1 from users u where u.id = r.customer_id) as found
          from unnest(string_to_array(${customerIds}, ',')::bigint[], string_to_array(${eventIds}, ',')::uuid[],
                      string_to_array(${traceContexts}, ',')) with ordinality as r(customer_id, event_id, trace_context, ord)
      ),
      wanted as (
        select w.ord, w.product_id, w.quantity, (row_number() over (partition by w.ord order by w.n))::int as line_no
          from unnest(string_to_array(${lineOrders}, ',')::int[], string_to_array(${productIds}, ',')::bigint[],
                      string_to_array(${quantities}, ',')::int[]) with ordinality as w(ord, product_id, quantity, n)
      ),
      locked as materialized (
        select s.product_id, s.available from stock s
         where s.product_id in (select w.product_id from wanted w join req r on r.ord = w.ord where r.found)
         order by s.product_id
           for update of s
      ),
      fits as (
        select w.ord from wanted w join req r on r.ord = w.ord and r.found left join locked l on l.product_id = w.product_id
         group by w.ord
        having bool_and(l.available is not null and l.available >= w.quantity)
      ),
      accepted as materialized (
        select a.ord, nextval('orders_id_seq') as id from (
          select d.ord from (
            select w.ord, l.available, sum(w.quantity) over (partition by w.product_id order by w.ord) as demand
              from wanted w join fits f on f.ord = w.ord join locked l on l.product_id = w.product_id
          ) d
           group by d.ord
          having bool_and(d.demand <= d.available)
           order by d.ord
        ) a
      ),
      reserved as (
        update stock s
           set available = s.available - t.quantity, reserved = s.reserved + t.quantity, updated_at = now()
          from (select w.product_id, sum(w.quantity)::int as quantity
                  from wanted w join accepted a on a.ord = w.ord group by w.product_id) t
         where s.product_id = t.product_id
        returning s.product_id
      ),
      lines as (
        select a.id as order_id, w.line_no, w.product_id, p.name, p.price, w.quantity
          from accepted a join wanted w on w.ord = a.ord join products p on p.id = w.product_id
      ),
      placed as (
        insert into orders (id, customer_id, status, total, item_count) overriding system value
        select a.id, r.customer_id, 'PENDING', sum(l.price * l.quantity), count(*)
          from accepted a join req r on r.ord = a.ord join lines l on l.order_id = a.id
         group by a.id, r.customer_id
        returning *
      ),
      items as (
        insert into order_items (order_id, line_no, product_id, product_name, quantity, unit_price)
        select l.order_id, l.line_no, l.product_id, l.name, l.quantity, l.price from lines l
      ),
      placed_event as (
        select o.*, r.event_id, r.trace_context from placed o join accepted a on a.id = o.id join req r on r.ord = a.ord
      ),
      ${recordEventWith('placed_event', {
        id: sql<string>`placed_event.event_id`,
        type: 'order.created',
        time: at,
        subject: sql<string>`'orders/' || placed_event.id`,
        data: orderV1JsonSql('placed_event'),
        owner: sql<number>`placed_event.customer_id`,
        traceContext: sql<string | null>`placed_event.trace_context`,
        fanOut: fanOutFromArgument(fanOut),
      })}
      select r.found as customer_found,
             case when r.ord = 1 then (select string_agg(product_id || ':' || available, ',') from locked) end as stock,
             case when r.ord = 1 then ${deliveriesOfStatement()} end as deliveries,
             o.*
        from req r left join accepted a on a.ord = r.ord left join placed o on o.id = a.id
       order by r.ord`,
    ),
  {
    // Row locks and a dozen index entries: not in the reads' pipeline (db/postgres-pool.ts).
    spread: true,
    // Two orders of customer 0, whom no user is: nothing is locked and nothing placed, so no
    // order, item, event or delivery is written and no count moves.
    warmUp: [
      '0,0',
      '00000000-0000-0000-0000-000000000000,00000000-0000-0000-0000-000000000000',
      '1,2',
      '0,0',
      '1,1',
      new Date(0),
      null,
      null,
    ],
  },
);

/** An order to place: its customer, and its lines in product order (each product once). */
export interface OrderToPlace {
  customerId: number;
  lines: readonly OrderLine[];
  /** True once the placing request's client has hung up: an order still waiting is not placed. */
  gone?: (() => boolean) | undefined;
}

export interface OrderLine {
  productId: number;
  quantity: number;
}

/** An order as the statement takes it: with how its event's deliveries are made, and its trace. */
interface QueuedOrder extends OrderToPlace {
  fanOut: FanOut;
  /** The placing request's `traceparent`, for its event (tracing on and sampled), else null. */
  traceContext: string | null;
  /** The placing request's span (sampled), beneath which a statement that places it is traced. */
  span: Span | undefined;
}

/**
 * At most this many orders share a statement: most of a statement's cost is per statement, not
 * per order, and past 16 what is left to gain is small against a longer wait for the orders of a
 * turn (docs/benchmark-log.md has the measurements).
 */
const MAX_ORDERS_PER_STATEMENT = 16;

const batchers = new WeakMap<Db, Batcher<QueuedOrder, Placement>>();

/**
 * Places an order (placeStatement). Outside a transaction, the orders that come while others are
 * being placed share a statement, at most one batch in flight per connection (db/batcher.ts);
 * inside one (an Idempotency-Key) the order is placed at once, alone, on its connection.
 */
export function attemptPlacement(db: Db, toPlace: OrderToPlace): Promise<Placement> {
  const span = spanOfDb(db);
  const order: QueuedOrder = {
    ...toPlace,
    fanOut: eventFanOut(db, 'order.created'),
    traceContext: traceparentOf(span),
    span,
  };
  if (db.isTransaction) return placeAlone(db, order);
  // One batcher per database, whichever request's (traced) handle the order came through; a
  // shared statement is traced beneath the first sampled request among its orders.
  const base = untraced(db)?.base ?? db;
  let batcher = batchers.get(base);
  if (batcher === undefined) {
    batcher = new Batcher(
      (orders) => {
        const parent = orders.find((o) => o.span !== undefined)?.span;
        return placeOrders(parent === undefined ? base : tracedDb(base, parent), orders);
      },
      {
        maxSize: MAX_ORDERS_PER_STATEMENT,
        maxInFlight: connectionCount(base),
        // docs/operations.md#overload: an order that waited longer than DATABASE_QUEUE_TIMEOUT_MS
        // for its batch (a hot product's row, every connection busy) is not placed: 503.
        maxWaitMs: queueTimeoutOf(base),
        expired: () => new Overloaded('queue'),
      },
    );
    batchers.set(base, batcher);
  }
  return batcher.call(order, toPlace.gone);
}

const NO_DELIVERIES: NewDeliveries = writtenDeliveries(null);
const NO_FAN_OUT = fanOutFromArgument(null);

async function placeAlone(db: Db, order: QueuedOrder): Promise<Placement> {
  const [placement] = await placeOrders(db, [order]);
  if (placement === undefined) throw new Error('placing an order returned no placement');
  return placement;
}

/**
 * Places orders in one statement: each one's placement, in their order. An order of several
 * that was not placed although its customer exists and each of its lines had the units is one
 * that an earlier order of the statement may have left short: it is placed alone, after, for its
 * own verdict. When the statement fails for one row's sake (a total out of range), each order is
 * placed alone, so that one order's error is not its neighbours'.
 */
async function placeOrders(db: Db, orders: QueuedOrder[]): Promise<(Placement | Promise<Placement>)[]> {
  const several = orders.length > 1;
  let rows: PlacementRow[];
  try {
    rows = await placeStatement(db, ...statementArguments(orders));
  } catch (error) {
    if (several && isRowError(error)) return orders.map((order) => placeAlone(db, order));
    throw error;
  }
  if (rows.length !== orders.length) throw new Error(`placing ${orders.length} orders returned ${rows.length} rows`);
  const placements = rows.map(partsOf);
  const available = availableOf(placements[0]?.stock ?? null);
  // The statement's deliveries go with its first placed order, to be handed over once (eventsWritten).
  let deliveries = writtenDeliveries(placements[0]?.deliveries ?? null);
  return placements.map(({ customerFound, order }, i) => {
    const toPlace = orders[i] as QueuedOrder;
    if (order !== undefined) {
      const placed = { customerFound, available, order, deliveries };
      deliveries = NO_DELIVERIES;
      return placed;
    }
    if (
      several &&
      customerFound &&
      toPlace.lines.every(({ productId, quantity }) => (available.get(productId) ?? -1) >= quantity)
    )
      return placeAlone(db, toPlace);
    return { customerFound, available, order: undefined, deliveries: NO_DELIVERIES };
  });
}

/** A row's parts: the customer's verdict, the order (none when it was not placed), and the rest. */
function partsOf(row: PlacementRow) {
  const { customer_found: customerFound, stock, deliveries, ...order } = row;
  return { customerFound, stock, deliveries, order: order.id === null ? undefined : order };
}

/** The stock column's `product:available,…` as a map. */
function availableOf(stock: string | null): Map<number, number> {
  const available = new Map<number, number>();
  for (const entry of stock?.split(',') ?? []) {
    const [productId, units] = entry.split(':');
    available.set(Number(productId), Number(units));
  }
  return available;
}

/**
 * The statement's arguments for `orders`: one comma-separated list per column (customers, event
 * ids, then each line's order, product and quantity), since a prepared statement's parameters
 * are scalars on every engine and behind a pooler; the statement splits them back with
 * string_to_array. This is the only place that writes them.
 */
function statementArguments(orders: readonly QueuedOrder[]) {
  const lineOrders: number[] = [];
  const productIds: number[] = [];
  const quantities: number[] = [];
  orders.forEach((order, i) => {
    for (const { productId, quantity } of order.lines) {
      lineOrders.push(i + 1);
      productIds.push(productId);
      quantities.push(quantity);
    }
  });
  return [
    orders.map((order) => order.customerId).join(','),
    orders.map(() => randomUUID()).join(','),
    lineOrders.join(','),
    productIds.join(','),
    quantities.join(','),
    new Date(),
    // A statement's orders share one fan-out: orders placed together are placed by one process.
    fanOutArgument(orders[0]?.fanOut ?? NO_FAN_OUT),
    // One entry per order ('' for none); null when none has one (tracing off: the common case).
    orders.some((order) => order.traceContext !== null)
      ? orders.map((order) => order.traceContext ?? '').join(',')
      : null,
  ] as const;
}
