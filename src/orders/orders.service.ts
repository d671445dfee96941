// Orders (docs/api-guide.md#orders): placing reserves stock in the same transaction as the insert;
// every action runs through the state machine on a locked row, and moves stock as it says.
import type { Principal } from '../auth/principal.js';
import type { Db } from '../db/database.js';
import { edgesOf, pageWindow, parseSort, type PageOf, type Seek } from '../page.js';
import { BusinessRuleViolation, EntityNotFound, Forbidden, InvalidOrderState, PreconditionFailed } from '../errors.js';
import { matchesVersion, type IfMatch } from '../preconditions.js';
import { moveStock } from '../products/index.js';
import { lineTotal, toJsonNumber } from '../money.js';
import {
  holdsReservation,
  isEditable,
  nextStatus,
  stockEffect,
  type OrderAction,
  type OrderStatus,
} from './order-status.js';
import * as repo from './orders.repository.js';
import * as placement from './placement.repository.js';
import type { Visibility } from './orders.repository.js';
import {
  ORDER_SORT_FIELDS,
  OrderDetailSchema,
  type OrderDetail,
  type OrderItem,
  type OrderListQuery,
  type OrderSummary,
  type UpdateOrder,
} from './orders.schemas.js';
import type { OrderItemRow, OrderRow } from './orders.table.js';
import { transact } from '../db/transact.js';
import fastJson from 'fast-json-stringify';
import { eventsWritten, idOnly, recordEvent, type EventType } from '../events/index.js';

/**
 * OWASP API1 (docs/api-guide.md#authentication-and-scopes): without admin, a caller sees only the orders whose customer it is.
 * Every query for orders is filtered through this; anyone else's order is simply not found.
 */
export function visibilityFor(caller: Principal): Visibility {
  return caller.admin ? 'all' : { customerId: caller.userId };
}

/** An order with its version, the ETag (docs/api-guide.md#safe-retries); the wire schemas do not list it. */
export type VersionedOrder = OrderDetail & { version: number };

export function toOrderDetail(row: OrderRow): VersionedOrder {
  return {
    version: row.version,
    id: row.id,
    customerId: row.customer_id,
    status: row.status,
    total: toJsonNumber(row.total),
    note: row.note,
    shippingAddress:
      row.shipping_street === null || row.shipping_postal_code === null
        ? null
        : { street: row.shipping_street, postalCode: row.shipping_postal_code },
    cancellationReason: row.cancellation_reason,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function toOrderSummary(row: OrderRow): OrderSummary {
  return {
    id: row.id,
    customerId: row.customer_id,
    status: row.status,
    total: toJsonNumber(row.total),
    itemCount: row.item_count,
    createdAt: row.created_at.toISOString(),
  };
}

export function toOrderItem(row: OrderItemRow): OrderItem {
  return {
    productId: row.product_id,
    productName: row.product_name,
    quantity: row.quantity,
    unitPrice: toJsonNumber(row.unit_price),
    lineTotal: toJsonNumber(lineTotal(row.unit_price, row.quantity)),
  };
}

export interface PlaceOrder {
  /** The customer; the caller when absent. Another customer needs admin. */
  customerId?: number;
  items: readonly { productId: number; quantity: number }[];
  /** True once the placing request's client has hung up: an order still waiting is not placed. */
  gone?: () => boolean;
}

/** Placing an order for another customer than the caller needs admin (docs/api-guide.md#authentication-and-scopes). */
export function assertMayOrderFor(caller: Principal, customerId: number | undefined): void {
  if (customerId !== undefined && customerId !== caller.userId && !caller.admin)
    throw new Forbidden('Placing an order for another customer needs the admin scope.', 'admin');
}

/**
 * Places an order: checks the customer, reserves every line's stock, inserts the order and its
 * items and records `order.created`, all in one statement, so an order exists exactly when its
 * stock is held and its event written (placement.repository.ts).
 */
export async function placeOrder(db: Db, caller: Principal, input: PlaceOrder): Promise<VersionedOrder> {
  const customerId = input.customerId ?? caller.userId;
  if (customerId === undefined)
    throw new BusinessRuleViolation('The caller is not a customer: the token subject must be a user id.', {
      customerId: caller.subject,
    });
  assertMayOrderFor(caller, customerId);

  // One line per product, locked in product order so that concurrent orders cannot deadlock.
  const quantities = new Map<number, number>();
  for (const item of input.items) quantities.set(item.productId, (quantities.get(item.productId) ?? 0) + item.quantity);
  const lines = [...quantities].sort(([a], [b]) => a - b).map(([productId, quantity]) => ({ productId, quantity }));

  // One statement, atomic on its own; inside a request's transaction (an Idempotency-Key) it
  // joins that one, and its deliveries go to the dispatcher when that commits.
  const placed = await placement.attemptPlacement(db, { customerId, lines, gone: input.gone });
  if (!placed.customerFound) throw new BusinessRuleViolation(`Customer ${customerId} does not exist.`, { customerId });
  if (placed.order === undefined) {
    // The first line, in product order, that could not be reserved.
    for (const { productId, quantity } of lines) {
      const available = placed.available.get(productId);
      if (available === undefined)
        throw new BusinessRuleViolation(`Product ${productId} does not exist.`, { productId });
      if (available < quantity)
        throw new BusinessRuleViolation(
          `Not enough stock for product ${productId}: ${quantity} requested, ${available} available.`,
          { productId },
        );
    }
    throw new Error('an order with a customer and every line available was not placed');
  }
  eventsWritten(db, placed.deliveries);
  return toOrderDetail(placed.order);
}

/** `gone`: true once the request's client has hung up (a read still waiting is not sent). */
export async function getOrder(db: Db, caller: Principal, id: number, gone?: () => boolean): Promise<VersionedOrder> {
  const row = await repo.findOrder(db, id, visibilityFor(caller), gone);
  if (row === undefined) throw new EntityNotFound('Order', id);
  return toOrderDetail(row);
}

export async function getOrderItems(db: Db, caller: Principal, id: number): Promise<OrderItem[]> {
  const [order, items] = await Promise.all([
    repo.findOrder(db, id, visibilityFor(caller)),
    repo.findOrderItems(db, id),
  ]);
  if (order === undefined) throw new EntityNotFound('Order', id);
  return items.map(toOrderItem);
}

export async function listOrders(
  db: Db,
  caller: Principal,
  q: OrderListQuery,
  seek?: Seek,
): Promise<PageOf<OrderSummary>> {
  const { size, offset } = pageWindow(q.page, q.size);
  const { rows, total } = await repo.listOrders(db, {
    ...(q.status !== undefined ? { status: q.status as OrderStatus } : {}),
    ...(q.customerId !== undefined ? { customerId: q.customerId } : {}),
    visibility: visibilityFor(caller),
    ...parseSort(q.sort, ORDER_SORT_FIELDS, 'desc'),
    offset,
    limit: size,
    seek,
  });
  const edges = edgesOf(rows);
  return { content: rows.map(toOrderSummary), total, page: q.page, size, ...(edges && { edges }) };
}

/** If-Match on a locked order: a version it does not name is 412, before any other rule. */
function assertVersion(order: OrderRow, ifMatch: IfMatch | undefined): void {
  if (!matchesVersion(ifMatch, order.version)) throw new PreconditionFailed('Order', order.id, order.version);
}

/** The event each action writes (docs/webhooks.md). */
const ACTION_EVENTS: Record<OrderAction, EventType> = {
  confirm: 'order.confirmed',
  ship: 'order.shipped',
  deliver: 'order.delivered',
  cancel: 'order.cancelled',
};

/** An event's data (docs/webhooks.md): the v1 representation, through the response schema. */
const orderV1Json = fastJson(OrderDetailSchema);

/**
 * Shipping and delivering are the merchant's actions (OWASP API5, function-level authorization):
 * without admin, 403 on any order, one's own included, before the order is even looked up. The
 * routes declare the same refusal (config.admin), so that it comes before an Idempotency-Key's
 * replay too; this check keeps the rule for any other caller of the service.
 */
export const MERCHANT_ONLY: Readonly<Partial<Record<OrderAction, string>>> = {
  ship: 'Marking an order shipped needs the admin scope.',
  deliver: 'Marking an order delivered needs the admin scope.',
};

/**
 * Runs `action` on the locked order: the state machine decides the next status (or the 409),
 * and the stock moves as the transition says, in the same transaction. The row lock makes the
 * If-Match check and the write atomic: a second writer with the same If-Match waits, then
 * finds the new version and gets 412.
 */
export async function applyAction(
  db: Db,
  caller: Principal,
  id: number,
  action: OrderAction,
  options: { reason?: string; ifMatch?: IfMatch | undefined } = {},
): Promise<VersionedOrder> {
  const merchantOnly = MERCHANT_ONLY[action];
  if (merchantOnly !== undefined && !caller.admin) throw new Forbidden(merchantOnly, 'admin');
  return transact(db, async (trx) => {
    const order = await repo.lockOrder(trx, id, visibilityFor(caller));
    if (order === undefined) throw new EntityNotFound('Order', id);
    assertVersion(order, options.ifMatch);
    const next = nextStatus(id, order.status, action);
    const effect = stockEffect(order.status, next);
    if (effect !== 'none') await moveStock(trx, await repo.findOrderLines(trx, id), effect);
    const updated = await repo.updateOrder(trx, id, {
      status: next,
      ...(action === 'cancel' ? { cancellation_reason: options.reason ?? null } : {}),
    });
    const detail = toOrderDetail(updated);
    await recordEvent(trx, {
      type: ACTION_EVENTS[action],
      subject: `orders/${id}`,
      data: orderV1Json(detail),
      owner: detail.customerId,
    });
    return detail;
  });
}

/** docs/api-guide.md#orders: note and shipping address change while the order is PENDING or CONFIRMED. */
export async function updateOrder(
  db: Db,
  caller: Principal,
  id: number,
  input: UpdateOrder,
  ifMatch?: IfMatch,
): Promise<VersionedOrder> {
  return transact(db, async (trx) => {
    const order = await repo.lockOrder(trx, id, visibilityFor(caller));
    if (order === undefined) throw new EntityNotFound('Order', id);
    assertVersion(order, ifMatch);
    if (!isEditable(order.status)) throw new InvalidOrderState(id, order.status, 'changed');
    const changes: Parameters<typeof repo.updateOrder>[2] = {};
    if (input.note !== undefined) changes.note = input.note;
    if (input.shippingAddress !== undefined) {
      changes.shipping_street = input.shippingAddress?.street ?? null;
      changes.shipping_postal_code = input.shippingAddress?.postalCode ?? null;
    }
    // Nothing to change: nothing written, no new version, no event.
    if (Object.keys(changes).length === 0) return toOrderDetail(order);
    const detail = toOrderDetail(await repo.updateOrder(trx, id, changes));
    await recordEvent(trx, {
      type: 'order.updated',
      subject: `orders/${id}`,
      data: orderV1Json(detail),
      owner: detail.customerId,
    });
    return detail;
  });
}

/**
 * Deletes the order (idempotent: a missing one, or one the caller cannot see, is a no-op). An
 * order that still holds stock gives it back first.
 */
export async function deleteOrder(db: Db, caller: Principal, id: number, ifMatch?: IfMatch): Promise<void> {
  await transact(db, async (trx) => {
    const order = await repo.lockOrder(trx, id, visibilityFor(caller));
    if (order === undefined) return;
    assertVersion(order, ifMatch);
    if (holdsReservation(order.status)) await moveStock(trx, await repo.findOrderLines(trx, id), 'release');
    await repo.deleteOrderById(trx, id);
    await recordEvent(trx, {
      type: 'order.deleted',
      subject: `orders/${id}`,
      data: idOnly(id),
      owner: order.customer_id,
    });
  });
}
