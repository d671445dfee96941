// The admission queue (admission-queue.ts): its regimes, driven by a clock the test holds.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AdmissionQueue, type Waiting } from './admission-queue.js';

interface Item extends Waiting {
  name: string;
}

function setUp(overrides: { serviceMs?: number; maxLength?: number } = {}) {
  const refused: string[] = [];
  const state = { serviceMs: overrides.serviceMs ?? 20 };
  const queue = new AdmissionQueue<Item>(
    { budgetMs: 250, serviceMs: () => state.serviceMs, maxLength: overrides.maxLength },
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

/**
 * Clients driven ms by ms on the test's clock: `arrive(ms)` says how many arrive in that ms, and
 * `serve(ms)` how many places free (each takes the next request the queue gives). With `closed`,
 * a client sends again as soon as it is answered or refused (a closed loop). What was started,
 * with how long it had waited, and the refusals, ms by ms.
 */
function drive(options: {
  ms: number;
  clients?: number;
  closed?: boolean;
  arrive?: (ms: number) => number;
  serve: (ms: number) => number;
  /** How busy the process is (the event loop's utilization): 1, busy, unless said. */
  busy?: () => number;
}) {
  const refusedAt: number[] = [];
  const startedWaits: { ms: number; waited: number }[] = [];
  let t = 0;
  const queue: AdmissionQueue<Waiting> = new AdmissionQueue<Waiting>(
    { budgetMs: 250, serviceMs: () => 20, busy: options.busy },
    () => {
      refusedAt.push(t);
      if (options.closed) send();
    },
    () => {},
  );
  const send = () => queue.push({ at: performance.now(), out: false });
  for (let i = 0; i < (options.clients ?? 0); i++) send();
  const run = (ms: number) => {
    for (const end = t + ms; t < end; t++) {
      for (let i = options.arrive?.(t) ?? 0; i > 0; i--) send();
      for (let i = options.serve(t); i > 0; i--) {
        const item = queue.take(performance.now());
        if (item === undefined) break;
        startedWaits.push({ ms: t, waited: performance.now() - item.at });
        if (options.closed) send();
      }
      vi.advanceTimersByTime(1);
    }
  };
  run(options.ms);
  const refusalsIn = (from: number, to: number) => refusedAt.filter((at) => at >= from && at < to).length;
  return { queue, run, refusalsIn, startedWaits, now: () => t };
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

  it('an open loop past capacity: the newest started within a few ms, the excess refused after a few ms, however long it lasts', () => {
    // Two arrive each ms, one place frees each ms: 1,000 refusals a second, whatever the wait.
    const { queue, refusalsIn, startedWaits } = drive({ ms: 6000, arrive: () => 2, serve: () => 1 });
    expect(queue.overloaded).toBe(true);
    expect(queue.timeoutMs).toBe(10);
    // Once overloaded (at 230 ms, when more wait than start within the allowance), nothing
    // started late: the trials of first in, first out (after 500 ms, then 1, 2 and 4 s) end once
    // the oldest has waited a quarter of the allowance.
    const after = startedWaits.filter(({ ms }) => ms > 600);
    expect(Math.max(...after.map(({ waited }) => waited))).toBeLessThanOrEqual(0.25 * 230 + 5);
    expect(after.filter(({ waited }) => waited > 25).length).toBeLessThanOrEqual(0.15 * after.length);
    expect(refusalsIn(1000, 6000)).toBeGreaterThan(4500);
  });

  it('an open loop at three times what it serves: overloaded once what waits cannot start within the allowance, before any has waited it', () => {
    // Three arrive each ms, one place frees each ms. First in, first out, the oldest would wait
    // out the allowance (230 ms) at 345 ms, and every request started until then would have
    // waited up to that long; at 1,000 starts a second, more than 230 waiting (at 115 ms) cannot
    // all start within it.
    const { queue, refusalsIn, startedWaits } = drive({ ms: 1000, arrive: () => 3, serve: () => 1 });
    expect(queue.overloaded).toBe(true);
    expect(refusalsIn(0, 200)).toBeGreaterThan(0);
    expect(Math.max(...startedWaits.map(({ waited }) => waited))).toBeLessThan(100);
  });

  it('a crowd whose every request starts within the allowance, in turn, is never refused', () => {
    // 220 clients that send again at once, a place freeing each ms: each waits 220 ms of 230.
    const { queue, refusalsIn, startedWaits, now } = drive({ ms: 5000, clients: 220, closed: true, serve: () => 1 });
    expect(queue.overloaded).toBe(false);
    expect(refusalsIn(0, now())).toBe(0);
    expect(Math.max(...startedWaits.map(({ waited }) => waited))).toBeLessThanOrEqual(230);
  });

  it('a burst of twice what fits, all at once and no more, is served in order: as much as starts within the allowance', () => {
    // A crowd of 100 waits 100 ms in turn for 300 ms (the rate measured: 230 fit), leaves, and
    // 200 ms later 460 arrive at once. First in, first out, the 230 or so that start within the
    // allowance are served; newest first, the oldest, all as old, would be refused together
    // within a fifth of the time it takes to drain (some 90 served).
    const clock = { ms: 0 };
    const { queue, refusalsIn, startedWaits } = drive({
      ms: 1500,
      clients: 100,
      get closed() {
        return clock.ms < 300;
      },
      arrive: (ms) => {
        clock.ms = ms;
        return ms === 600 ? 460 : 0;
      },
      serve: () => 1,
    });
    const burst = startedWaits.filter(({ ms }) => ms >= 600);
    expect(burst.length).toBeGreaterThanOrEqual(220);
    expect(refusalsIn(0, 600)).toBe(0);
    expect(queue.length).toBe(0);
  });

  it('a closed loop over what fits: the wait grows until refusing costs at most four refusals a start', () => {
    // 300 clients that send again at once, one place freeing every 2 ms (500 a second): first in,
    // first out, each would wait 600 ms, past the allowance (230 ms). Refused after 10 ms, each
    // would come back about 100 times a second: some 30,000 refusals a second, for no answer
    // sooner.
    const { queue, refusalsIn, startedWaits, now } = drive({
      ms: 4000,
      clients: 300,
      closed: true,
      serve: (ms) => (ms % 2 === 0 ? 1 : 0),
    });
    expect(queue.overloaded).toBe(true);
    // 300 waiting, refused at most 2,000 times a second (four for each of 500 starts): each once
    // every 150 ms or so.
    expect(queue.timeoutMs).toBeGreaterThanOrEqual(120);
    expect(refusalsIn(now() - 2000, now())).toBeLessThanOrEqual(2 * 2000 * 1.1);
    // No request started that could not be answered within the budget.
    expect(Math.max(...startedWaits.map(({ waited }) => waited))).toBeLessThanOrEqual(queue.allowanceMs + 5);
  });

  it('a closed loop over what fits while the process has room: the bound widens until it is busy', () => {
    // The same 300 clients, but the requests' work is elsewhere: the event loop is busy half the
    // time (a pool of 300 connections bounded by its client, offered more than it sends, is such a
    // closed loop, and is refused as fast as it sends while refusing costs no answer).
    const loop = { busy: 0.5 };
    const { queue, run, refusalsIn, startedWaits, now } = drive({
      ms: 3000,
      clients: 300,
      closed: true,
      serve: (ms) => (ms % 2 === 0 ? 1 : 0),
      busy: () => loop.busy,
    });
    expect(queue.overloaded).toBe(true);
    expect(queue.room).toBe(16);
    // 16 times the bound: 32,000 refusals a second, so each of the 300 waits the least, 10 ms.
    expect(queue.timeoutMs).toBe(10);
    expect(refusalsIn(now() - 1000, now())).toBeGreaterThan(20_000);
    // Between 85% and 95% busy, the bound holds where it is.
    loop.busy = 0.9;
    run(1000);
    expect(queue.room).toBe(16);
    // Busy: halved at each step back to the bound of four refusals a start.
    loop.busy = 0.99;
    run(500);
    expect(queue.room).toBe(1);
    run(1500);
    expect(queue.timeoutMs).toBeGreaterThanOrEqual(120);
    expect(refusalsIn(now() - 1000, now())).toBeLessThanOrEqual(2000 * 1.1);
    expect(Math.max(...startedWaits.map(({ waited }) => waited))).toBeLessThanOrEqual(queue.allowanceMs + 5);
  });

  it('each overload starts from the bound, however wide it was in the one before', () => {
    const load = { closed: true, arriving: 0, busy: 0.5 };
    const { queue, run } = drive({
      ms: 2000,
      clients: 300,
      get closed() {
        return load.closed;
      },
      arrive: () => load.arriving,
      serve: (ms) => (ms % 2 === 0 ? 1 : 0),
      busy: () => load.busy,
    });
    expect(queue.room).toBe(16);
    // The crowd leaves; the queue empties, calms down and stops, the loop idle all along.
    load.closed = false;
    run(2000);
    expect(queue.length).toBe(0);
    expect(queue.overloaded).toBe(false);
    // A busy loop's overload next: from four refusals a start, not from 16 times that.
    load.busy = 0.99;
    load.arriving = 2;
    run(1);
    expect(queue.room).toBe(1);
    run(2000);
    expect(queue.room).toBe(1);
  });

  it('a closed loop that gives way to an open loop: the wait goes back to a few ms', () => {
    const load = { closed: true, arriving: 0 };
    const { queue, run, startedWaits } = drive({
      ms: 3000,
      clients: 300,
      get closed() {
        return load.closed;
      },
      arrive: () => load.arriving,
      serve: (ms) => (ms % 2 === 0 ? 1 : 0),
    });
    expect(queue.timeoutMs).toBeGreaterThanOrEqual(120);
    // The crowd leaves (what it left waiting is refused in time); 1,000 a second arrive instead,
    // twice what the instance serves.
    load.closed = false;
    load.arriving = 1;
    run(3000);
    expect(queue.overloaded).toBe(true);
    expect(queue.timeoutMs).toBe(10);
    expect(startedWaits.at(-1)?.waited).toBeLessThanOrEqual(2);
  });

  it('a closed loop that fits first in, first out is served so again once a stall is over', () => {
    // 30 clients, one place freeing every 2 ms: each waits 60 ms in turn, within the allowance.
    // A stall of 300 ms (a dependency, a collection) makes the queue refuse, newest first, where
    // the oldest never reach the front; the trial of the normal regime ends that.
    let stalled = true;
    const { queue, run, refusalsIn, now } = drive({
      ms: 300,
      clients: 30,
      closed: true,
      serve: (ms) => (!stalled && ms % 2 === 0 ? 1 : 0),
    });
    expect(queue.overloaded).toBe(true);
    stalled = false;
    run(4000);
    expect(queue.overloaded).toBe(false);
    expect(refusalsIn(now() - 1000, now())).toBe(0);
  });

  it('so is a small crowd, whose overloaded wait is the least', () => {
    // 30 clients, a place freeing every ms: in turn each waits 30 ms; newest first after the
    // stall, refused after 10 ms (what keeps 4 refusals a start allows 7.5).
    let stalled = true;
    const { queue, run, refusalsIn, now } = drive({
      ms: 300,
      clients: 30,
      closed: true,
      serve: () => (stalled ? 0 : 1),
    });
    expect(queue.overloaded).toBe(true);
    stalled = false;
    run(4000);
    expect(queue.overloaded).toBe(false);
    expect(refusalsIn(now() - 1000, now())).toBe(0);
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
