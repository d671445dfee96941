// The admission queue (admission-queue.ts): its regimes, driven by a clock the test holds.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AdmissionQueue, type Waiting } from './admission-queue.js';

interface Item extends Waiting {
  name: string;
}

function setUp(overrides: { serviceMs?: number; busy?: number; open?: number; maxLength?: number } = {}) {
  const refused: string[] = [];
  const state = {
    serviceMs: overrides.serviceMs ?? 20,
    busy: overrides.busy ?? 0,
    open: overrides.open ?? 100,
  };
  const queue = new AdmissionQueue<Item>(
    {
      budgetMs: 250,
      serviceMs: () => state.serviceMs,
      connections: () => ({ busy: Math.round(state.busy * state.open), open: state.open }),
      maxLength: overrides.maxLength,
    },
    (item) => refused.push(item.name),
    () => {},
  );
  let n = 0;
  const add = (at = performance.now()) => {
    const item: Item = { at, out: false, name: `r${n++}` };
    expect(queue.push(item)).toBe(true);
    return item;
  };
  return { queue, refused, state, add };
}

describe('the admission queue', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('serves in arrival order and refuses nothing that waited less than the budget less the service time', () => {
    const { queue, refused, add } = setUp({ serviceMs: 20 });
    expect(queue.allowanceMs).toBe(230);
    add();
    add();
    vi.advanceTimersByTime(229);
    expect(refused).toEqual([]);
    expect(queue.take(performance.now())?.name).toBe('r0');
    expect(queue.take(performance.now())?.name).toBe('r1');
    expect(queue.take(performance.now())).toBeUndefined();
  });

  it('refuses, on its own timer, what waited past its allowance, oldest first, never less than 40% of the budget', () => {
    const { queue, refused, state, add } = setUp({ serviceMs: 400 });
    expect(queue.allowanceMs).toBe(100);
    add();
    vi.advanceTimersByTime(95);
    expect(refused).toEqual([]);
    vi.advanceTimersByTime(10);
    expect(refused).toEqual(['r0']);
    expect(queue.length).toBe(0);
    state.serviceMs = 20;
    expect(queue.allowanceMs).toBe(230);
  });

  it('once it refuses, serves the newest first and refuses after a few ms; calm again when nothing is refused', () => {
    const { queue, refused, add } = setUp({ serviceMs: 20 });
    add();
    vi.advanceTimersByTime(235);
    expect(refused).toEqual(['r0']);
    expect(queue.overloaded).toBe(true);
    expect(queue.timeoutMs).toBe(10);
    add();
    add();
    expect(queue.take(performance.now())?.name).toBe('r2');
    vi.advanceTimersByTime(15);
    expect(refused).toEqual(['r0', 'r1']);
    vi.advanceTimersByTime(600);
    expect(queue.overloaded).toBe(false);
    add();
    vi.advanceTimersByTime(200);
    expect(refused).toEqual(['r0', 'r1']);
  });

  it('stays in the normal regime for a while when nearly every connection has a request in (a closed loop)', () => {
    const { queue, refused, state, add } = setUp({ serviceMs: 20, busy: 0.95 });
    add();
    vi.advanceTimersByTime(235);
    expect(queue.overloaded).toBe(true);
    // Keeps refusing while it watches, as a closed loop would make it.
    for (let i = 0; i < 20 && queue.overloaded; i++) {
      add();
      vi.advanceTimersByTime(11);
    }
    expect(queue.overloaded).toBe(false);
    while (queue.take(performance.now()) !== undefined);
    const before = refused.length;
    // Held: what would pass twice the budget (500 ms less the 20 the service needs).
    expect(queue.held).toBe(true);
    expect(queue.allowanceMs).toBe(480);
    add();
    vi.advanceTimersByTime(470);
    expect(refused.length).toBe(before);
    vi.advanceTimersByTime(20);
    expect(refused.length).toBe(before + 1);
    // Held: that refusal did not make it overloaded again.
    expect(queue.overloaded).toBe(false);
    state.busy = 0.1;
    vi.advanceTimersByTime(5000);
    expect(queue.held).toBe(false);
    add();
    vi.advanceTimersByTime(240);
    expect(queue.overloaded).toBe(true);
  });

  it('does not hold a few connections, all busy: refusing them at once costs the core little', () => {
    // Three connections refused every 10 ms: 300 a second, under the 2,000 a crowd would make.
    const { queue, add } = setUp({ serviceMs: 20, busy: 1, open: 3 });
    add();
    vi.advanceTimersByTime(235);
    expect(queue.overloaded).toBe(true);
    for (let i = 0; i < 40; i++) {
      add();
      vi.advanceTimersByTime(11);
      expect(queue.overloaded).toBe(true);
    }
    expect(queue.held).toBe(false);
  });

  it('skips a request whose client left, and says when it is full', () => {
    const { queue, add } = setUp({ maxLength: 2 });
    const first = add();
    add();
    expect(queue.push({ at: performance.now(), out: false, name: 'over' })).toBe(false);
    queue.drop(first);
    expect(queue.length).toBe(1);
    expect(queue.take(performance.now())?.name).toBe('r1');
    expect(queue.length).toBe(0);
  });
});
