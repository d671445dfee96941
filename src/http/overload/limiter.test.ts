// The adaptive concurrency limit's controller (limiter.ts), driven by a clock the test holds.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from './limiter.js';

/**
 * Runs `windows` windows of 100 ms: each keeps as many requests in flight as the limit allows
 * (`demand` of them at most) and answers them after `latencyMs`. The clock is the test's.
 */
function drive(
  limiter: ConcurrencyLimiter,
  clock: { now: number },
  windows: number,
  latencyMs: number | ((inflight: number) => number),
  demand = Number.POSITIVE_INFINITY,
): number[] {
  const limits: number[] = [];
  for (let w = 0; w < windows; w++) {
    let admitted = 0;
    while (admitted < demand && limiter.tryAcquire()) admitted++;
    const inflight = limiter.inflight;
    const latency = typeof latencyMs === 'number' ? latencyMs : latencyMs(inflight);
    clock.now += 100;
    for (let i = 0; i < admitted; i++) limiter.release(latency, clock.now);
    limits.push(limiter.limit);
  }
  return limits;
}

describe('the adaptive concurrency limit', () => {
  it('rises while latency holds, up to its maximum', () => {
    const limiter = new ConcurrencyLimiter({ min: 4, max: 200, initial: 20 });
    const limits = drive(limiter, { now: 0 }, 200, 10);
    expect(limits[10]!).toBeGreaterThan(20);
    expect(limits.at(-1)).toBe(200);
    // Never down while nothing got slower.
    for (let i = 1; i < limits.length; i++) expect(limits[i]!).toBeGreaterThanOrEqual(limits[i - 1]!);
  });

  it('falls when latency grows with what is in flight (a saturated core, a hot row), and holds there', () => {
    const limiter = new ConcurrencyLimiter({ min: 4, max: 1000, initial: 50, floorMs: 0 });
    const clock = { now: 0 };
    // Up to 40 in flight the service answers in 10 ms; past that, requests queue: latency grows
    // with each one in flight beyond.
    const service = (inflight: number) => (inflight <= 40 ? 10 : 10 * (inflight / 40) ** 2);
    drive(limiter, clock, 20, 10, 40);
    const limits = drive(limiter, clock, 300, service);
    const settled = limits.slice(-100);
    // It finds the knee: well below where latency runs away, never at its maximum.
    expect(Math.max(...settled)).toBeLessThan(120);
    expect(Math.min(...settled)).toBeGreaterThanOrEqual(4);
    const latencyThere = service(Math.max(...settled));
    expect(latencyThere).toBeLessThan(10 * 2 * 3);
  });

  it('falls at once when a dependency slows down, and recovers once it is fast again', () => {
    const limiter = new ConcurrencyLimiter({ min: 4, max: 500, initial: 100, floorMs: 0 });
    const clock = { now: 0 };
    drive(limiter, clock, 30, 10);
    const before = limiter.limit;
    const slow = drive(limiter, clock, 30, 200);
    expect(slow.at(-1)!).toBeLessThan(before / 4);
    const recovered = drive(limiter, clock, 80, 10);
    expect(recovered.at(-1)!).toBeGreaterThan(slow.at(-1)! * 3);
  });

  it('takes no latency under its floor for queueing: a saturated core under a fixed crowd is not shed', () => {
    const limiter = new ConcurrencyLimiter({ min: 4, max: 1000, initial: 100 });
    const clock = { now: 0 };
    drive(limiter, clock, 20, 0.5, 100);
    // A crowd of 64 on a saturated core: 15 times slower than idle, still far under 25 ms.
    const limits = drive(limiter, clock, 100, 8, 64);
    expect(Math.min(...limits)).toBeGreaterThanOrEqual(64);
    // Past the floor's tolerance (50 ms), it sheds.
    const slow = drive(limiter, clock, 50, 400);
    expect(slow.at(-1)!).toBeLessThan(64);
  });

  it('learns nothing from a window in which little was in flight', () => {
    const limiter = new ConcurrencyLimiter({ min: 4, max: 500, initial: 100 });
    drive(limiter, { now: 0 }, 50, 10, 5);
    expect(limiter.limit).toBe(100);
  });

  it('stays within its bounds, and refuses once the limit is in flight', () => {
    const limiter = new ConcurrencyLimiter({ min: 8, max: 16, initial: 12, floorMs: 0 });
    const clock = { now: 0 };
    drive(limiter, clock, 10, 10);
    drive(limiter, clock, 50, 5000);
    expect(limiter.limit).toBe(8);
    for (let i = 0; i < 8; i++) expect(limiter.tryAcquire()).toBe(true);
    expect(limiter.tryAcquire()).toBe(false);
    limiter.cancel();
    expect(limiter.tryAcquire()).toBe(true);
    expect(() => new ConcurrencyLimiter({ min: 10, max: 5 })).toThrow(RangeError);
  });

  it('falls while the event loop lags past its target though latency holds, holds past half of it, and rises once the loop keeps up', () => {
    // Requests queued unread in the sockets of a full core: the admitted ones are answered in
    // 10 ms, but each turn of the loop lasts 200 ms.
    let delay = 0;
    const limiter = new ConcurrencyLimiter({ min: 4, max: 1000, initial: 200 });
    limiter.heedLoopDelay(() => delay, 50);
    const clock = { now: 0 };
    drive(limiter, clock, 10, 10);
    const before = limiter.limit;
    delay = 200;
    const behind = drive(limiter, clock, 5, 10);
    expect(behind.at(-1)!).toBeLessThan(before / 8);
    // Past half the target: no growth, latency or not.
    delay = 30;
    const held = drive(limiter, clock, 30, 10);
    expect(Math.max(...held)).toBe(behind.at(-1)!);
    delay = 5;
    const recovered = drive(limiter, clock, 30, 10);
    expect(recovered.at(-1)!).toBeGreaterThan(behind.at(-1)! * 2);
    // Without the loop's delay, the same latency never shrinks the limit.
    const blind = new ConcurrencyLimiter({ min: 4, max: 1000, initial: 200 });
    const limits = drive(blind, { now: 0 }, 15, 10);
    expect(Math.min(...limits)).toBeGreaterThanOrEqual(200);
  });
});
