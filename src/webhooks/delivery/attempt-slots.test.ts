import { describe, expect, it } from 'vitest';
import { AttemptSlots } from './attempt-slots.js';

const delivery = (id: number, subscription_id: number) => ({ id, subscription_id });

describe('the dispatcher’s attempt slots', () => {
  it('open at most `total` attempts in the process, whatever the subscriptions, and more as they end', () => {
    const slots = new AttemptSlots<ReturnType<typeof delivery>>(2, 5);
    // Ten subscriptions with one delivery each: each has a slot free, the process has five.
    for (let s = 1; s <= 10; s++) slots.hold(delivery(s, s), 0);
    const first = slots.start();
    expect(first.map((d) => d.id)).toEqual([1, 2, 3, 4, 5]);
    expect(slots.opened).toBe(5);
    expect(slots.held).toBe(5);
    expect(slots.room()).toBe(0);
    expect(slots.start()).toEqual([]);
    // Two end: two more start, the oldest waiting first.
    slots.done(1);
    slots.done(2);
    expect(slots.start().map((d) => d.id)).toEqual([6, 7]);
    expect(slots.opened).toBe(5);
    expect(slots.held).toBe(3);
  });

  it('count what is in hand against the process: room is what neither opened nor held takes', () => {
    const slots = new AttemptSlots<ReturnType<typeof delivery>>(8, 6);
    for (let i = 1; i <= 4; i++) slots.hold(delivery(i, 1), 0);
    expect(slots.room()).toBe(2);
    slots.start();
    expect(slots.room()).toBe(2);
    slots.done(1);
    expect(slots.room()).toBe(3);
  });

  it('give a subscription no more than its own slots while the process has room, and name it busy', () => {
    const slots = new AttemptSlots<ReturnType<typeof delivery>>(2, 100);
    for (let i = 1; i <= 5; i++) slots.hold(delivery(i, 7), 0);
    slots.hold(delivery(6, 8), 0);
    expect(slots.start().map((d) => d.id)).toEqual([1, 2, 6]);
    expect(slots.busy()).toEqual([7]);
    slots.done(7);
    expect(slots.start().map((d) => d.id)).toEqual([3]);
  });

  it('give back what waited too long, and everything at shutdown', () => {
    const slots = new AttemptSlots<ReturnType<typeof delivery>>(1, 100);
    slots.hold(delivery(1, 1), 0);
    slots.hold(delivery(2, 1), 10);
    slots.hold(delivery(3, 1), 20);
    expect(slots.start().map((d) => d.id)).toEqual([1]);
    expect(slots.expired(15).map((d) => d.id)).toEqual([2]);
    expect(slots.held).toBe(1);
    expect(slots.drain().map((d) => d.id)).toEqual([3]);
    expect(slots.held).toBe(0);
  });
});
