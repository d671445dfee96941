// The order lifecycle of docs/api-guide.md#orders as one pure state machine. Every action route goes through
// nextStatus(); the stock effect of each transition is named here too, so the service only
// applies it.
import { InvalidOrderState, OrderAlreadyCancelled } from '../errors.js';

export { InvalidOrderState, OrderAlreadyCancelled };

export const ORDER_STATUSES = ['PENDING', 'CONFIRMED', 'SHIPPED', 'DELIVERED', 'CANCELLED'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export const ORDER_ACTIONS = ['confirm', 'ship', 'deliver', 'cancel'] as const;
export type OrderAction = (typeof ORDER_ACTIONS)[number];

const TRANSITIONS: Record<OrderAction, Partial<Record<OrderStatus, OrderStatus>>> = {
  confirm: { PENDING: 'CONFIRMED' },
  ship: { CONFIRMED: 'SHIPPED' },
  deliver: { SHIPPED: 'DELIVERED' },
  cancel: { PENDING: 'CANCELLED', CONFIRMED: 'CANCELLED' },
};

const PAST: Record<OrderAction, string> = {
  confirm: 'confirmed',
  ship: 'shipped',
  deliver: 'delivered',
  cancel: 'cancelled',
};

/** The status after `action`, or the Conflict that forbids it. */
export function nextStatus(orderId: number, current: OrderStatus, action: OrderAction): OrderStatus {
  const next = TRANSITIONS[action][current];
  if (next !== undefined) return next;
  if (action === 'cancel' && current === 'CANCELLED') throw new OrderAlreadyCancelled(orderId);
  throw new InvalidOrderState(orderId, current, PAST[action]);
}

/** Whether the order's fields (note, address) may still change: before it leaves. */
export function isEditable(status: OrderStatus): boolean {
  return status === 'PENDING' || status === 'CONFIRMED';
}

/** Whether the order still holds reserved stock: it has neither shipped nor been cancelled. */
export function holdsReservation(status: OrderStatus): boolean {
  return status === 'PENDING' || status === 'CONFIRMED';
}

/** How a transition moves stock (docs/api-guide.md#products-and-stock): cancelling releases, shipping consumes. */
export function stockEffect(from: OrderStatus, to: OrderStatus): 'release' | 'consume' | 'none' {
  if (to === 'CANCELLED' && holdsReservation(from)) return 'release';
  if (to === 'SHIPPED') return 'consume';
  return 'none';
}
