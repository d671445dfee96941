import { describe, expect, it } from 'vitest';
import {
  InvalidOrderState,
  ORDER_ACTIONS,
  ORDER_STATUSES,
  OrderAlreadyCancelled,
  holdsReservation,
  isEditable,
  nextStatus,
  stockEffect,
  type OrderAction,
  type OrderStatus,
} from './order-status.js';

// Every (state, action) pair: the expected next state, or the conflict.
const EXPECTED: Record<OrderStatus, Record<OrderAction, OrderStatus | 'already-cancelled' | 'invalid'>> = {
  PENDING: { confirm: 'CONFIRMED', ship: 'invalid', deliver: 'invalid', cancel: 'CANCELLED' },
  CONFIRMED: { confirm: 'invalid', ship: 'SHIPPED', deliver: 'invalid', cancel: 'CANCELLED' },
  SHIPPED: { confirm: 'invalid', ship: 'invalid', deliver: 'DELIVERED', cancel: 'invalid' },
  DELIVERED: { confirm: 'invalid', ship: 'invalid', deliver: 'invalid', cancel: 'invalid' },
  CANCELLED: { confirm: 'invalid', ship: 'invalid', deliver: 'invalid', cancel: 'already-cancelled' },
};

describe('nextStatus', () => {
  const pairs = ORDER_STATUSES.flatMap((s) => ORDER_ACTIONS.map((a) => [s, a, EXPECTED[s][a]] as const));

  it.each(pairs)('%s + %s → %s', (status, action, expected) => {
    const run = () => nextStatus(7, status, action);
    if (expected === 'already-cancelled') {
      expect(run).toThrow(OrderAlreadyCancelled);
      expect(run).toThrow('Order 7 is already cancelled.');
    } else if (expected === 'invalid') {
      expect(run).toThrow(InvalidOrderState);
      try {
        run();
      } catch (e) {
        expect((e as InvalidOrderState).currentStatus).toBe(status);
      }
    } else {
      expect(run()).toBe(expected);
    }
  });
});

describe('stock effects and editability', () => {
  it('releases on cancel from an unshipped state, consumes on ship, and nothing else', () => {
    expect(stockEffect('PENDING', 'CANCELLED')).toBe('release');
    expect(stockEffect('CONFIRMED', 'CANCELLED')).toBe('release');
    expect(stockEffect('CONFIRMED', 'SHIPPED')).toBe('consume');
    expect(stockEffect('PENDING', 'CONFIRMED')).toBe('none');
    expect(stockEffect('SHIPPED', 'DELIVERED')).toBe('none');
  });

  it.each(ORDER_STATUSES)('%s is editable and holds stock only before it ships', (status) => {
    const before = status === 'PENDING' || status === 'CONFIRMED';
    expect(isEditable(status)).toBe(before);
    expect(holdsReservation(status)).toBe(before);
  });
});
