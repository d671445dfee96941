// The limit on requests executing (limiter.ts), driven by a model of an instance and a clock
// the test holds.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from './limiter.js';

/**
 * Runs `windows` windows of 100 ms against an instance that answers at most `capacity` a
 * second, each request taking at least `leastMs`: by Little's law, `n` executing take
 * max(leastMs, n / capacity) each on average. `demand` requests want a place (the rest wait: the
 * limit binds). `spread`: the service times spread evenly from half to one and a half times
 * their mean, rather than all the mean.
 */
function drive(
  limiter: ConcurrencyLimiter,
  clock: { now: number },
  windows: number,
  {
    capacity,
    leastMs,
    demand = Number.POSITIVE_INFINITY,
    spread = false,
  }: { capacity: number; leastMs: number; demand?: number; spread?: boolean },
): number[] {
  const limits: number[] = [];
  for (let w = 0; w < windows; w++) {
    while (limiter.inflight < demand && limiter.tryAcquire());
    if (limiter.inflight < demand) limiter.bind();
    const executing = limiter.inflight;
    const serviceMs = Math.max(leastMs, (1000 * executing) / capacity);
    // What the window answers: each place turns over every serviceMs, up to the capacity; each
    // answer's place is taken again at once while there is demand.
    const answers = Math.max(1, Math.round((executing * 100) / serviceMs));
    for (let i = 0; i < answers; i++) {
      const ms = spread ? serviceMs * (0.5 + (i + 0.5) / answers) : serviceMs;
      limiter.release(ms, clock.now + ((i + 1) * 100) / answers);
      if (limiter.inflight < demand && !limiter.tryAcquire()) limiter.bind();
    }
    clock.now += 100;
    limits.push(limiter.limit);
  }
  return limits;
}

describe('the limit on requests executing', () => {
  it('settles where the service time meets the target once the instance is saturated', () => {
    // 5,000 answers a second, 1 ms each alone: a target of 62.5 ms is about 312 executing.
    const limiter = new ConcurrencyLimiter({ min: 8, max: 5000, initial: 20, targetMs: 62.5 });
    const limits = drive(limiter, { now: 0 }, 100, { capacity: 5000, leastMs: 1 });
    const settled = limits.slice(-30);
    expect(Math.min(...settled)).toBeGreaterThan(250);
    expect(Math.max(...settled)).toBeLessThan(400);
  });

  it("keeps the service time's p99, not its mean, at the target when the service times spread", () => {
    // The same instance, its service times spread evenly from half to 1.5 times their mean: a
    // p99 of 62.5 ms is a mean of about 42 ms, about 210 executing (the p99 read at its bucket's
    // upper bound, up to 19% over: 175 to 210). Steered by the mean, it would be about 312; at
    // the factor's floor of a half, 156.
    const limiter = new ConcurrencyLimiter({ min: 8, max: 5000, initial: 20, targetMs: 62.5 });
    const limits = drive(limiter, { now: 0 }, 100, { capacity: 5000, leastMs: 1, spread: true });
    const settled = limits.slice(-30);
    expect(Math.min(...settled)).toBeGreaterThan(165);
    expect(Math.max(...settled)).toBeLessThan(225);
    expect(limiter.p99).toBeGreaterThan(50);
    expect(limiter.p99).toBeLessThanOrEqual(62.5 * 1.19);
  });

  it('keeps at least half the limit the mean gives when a few slow requests of another kind make the p99 (password hashes among reads)', () => {
    // 5,000 answers a second of 2 ms reads, one in fifty a 300-ms hash: the p99 is the hashes',
    // the mean 8 ms. Steered by mean / p99 alone, the limit would fall to about 13, near its
    // floor of 8, and 13 places could start only some 1,600 a second.
    const limiter = new ConcurrencyLimiter({ min: 8, max: 5000, initial: 100, targetMs: 100, minSamples: 50 });
    let now = 0;
    for (let w = 0; w < 100; w++) {
      while (limiter.tryAcquire());
      limiter.bind();
      for (let i = 0; i < 500; i++) {
        now += 0.2;
        limiter.release(i % 50 === 0 ? 300 : 2, now);
        limiter.acquire();
      }
    }
    // Peak 5,000 a second × 100 ms × a half.
    expect(limiter.limit).toBeGreaterThanOrEqual(200);
    expect(limiter.limit).toBeLessThanOrEqual(260);
  });

  it('follows the throughput down when the instance delivers less (dearer requests, a slower host), never to its floor', () => {
    const limiter = new ConcurrencyLimiter({ min: 8, max: 5000, initial: 300, targetMs: 62.5 });
    const clock = { now: 0 };
    drive(limiter, clock, 50, { capacity: 5000, leastMs: 1 });
    const limits = drive(limiter, clock, 60, { capacity: 1000, leastMs: 5 });
    expect(Math.min(...limits.slice(-20))).toBeGreaterThan(50);
    expect(Math.max(...limits.slice(-20))).toBeLessThan(100);
  });

  it('after a quiet spell, follows what the instance delivers now, not its peak before the spell', () => {
    // Saturated at 5,000 a second (a limit of about 312), then every request answered and 5 s of
    // nothing, then saturated again at 1,000 a second (the database slower now): a target of
    // 62.5 ms is about 62 executing. The peak before the spell would hold the limit near 312 for
    // 2 s of new windows, each request in flight five times the target.
    const limiter = new ConcurrencyLimiter({ min: 8, max: 5000, initial: 20, targetMs: 62.5 });
    const clock = { now: 0 };
    drive(limiter, clock, 60, { capacity: 5000, leastMs: 1 });
    expect(limiter.limit).toBeGreaterThan(250);
    while (limiter.inflight > 0) limiter.release(1, clock.now);
    clock.now += 5000;
    const limits = drive(limiter, clock, 6, { capacity: 1000, leastMs: 5 });
    expect(limits.at(-1)).toBeLessThan(100);
  });

  it('reads no quiet spell as a fall in throughput: the same instance after it keeps its limit', () => {
    const limiter = new ConcurrencyLimiter({ min: 8, max: 5000, initial: 20, targetMs: 62.5 });
    const clock = { now: 0 };
    drive(limiter, clock, 60, { capacity: 5000, leastMs: 1 });
    const before = limiter.limit;
    while (limiter.inflight > 0) limiter.release(1, clock.now);
    clock.now += 5000;
    // (A window spanning the spell would read a few answers in 5 s: the limit halved.)
    const limits = drive(limiter, clock, 10, { capacity: 5000, leastMs: 1 });
    expect(Math.min(...limits)).toBeGreaterThan(0.8 * before);
  });

  it('keeps its minimum for requests that take longer alone than the target (a password hash)', () => {
    // 40 a second at most, 100 ms each alone: the knee is 4 executing, under the minimum of 8.
    const limiter = new ConcurrencyLimiter({ min: 8, max: 1000, initial: 50, targetMs: 62.5, minSamples: 2 });
    const limits = drive(limiter, { now: 0 }, 200, { capacity: 40, leastMs: 100 });
    expect(limits.at(-1)).toBe(8);
  });

  it('changes nothing in a window where it did not bind, however slow the requests (dearer requests are not overload)', () => {
    const limiter = new ConcurrencyLimiter({ min: 8, max: 1000, initial: 300, targetMs: 62.5 });
    const limits = drive(limiter, { now: 0 }, 50, { capacity: 200, leastMs: 300, demand: 64 });
    expect(limits.every((l) => l === 300)).toBe(true);
  });

  it('moves at most by half or double a window, within its bounds', () => {
    const limiter = new ConcurrencyLimiter({ min: 10, max: 1000, initial: 900, targetMs: 10 });
    const limits = drive(limiter, { now: 0 }, 40, { capacity: 100, leastMs: 1 });
    expect(limits[0]!).toBeGreaterThanOrEqual(450);
    for (let i = 1; i < limits.length; i++) expect(limits[i]!).toBeGreaterThanOrEqual(Math.floor(limits[i - 1]! / 2));
    expect(limits.at(-1)).toBe(10);
  });

  it('gives a smoothed p99 of the service time', () => {
    const limiter = new ConcurrencyLimiter({ min: 1, max: 1000, initial: 1000, targetMs: 50, minSamples: 100 });
    for (let i = 0; i < 100; i++) limiter.acquire();
    for (let i = 0; i < 100; i++) limiter.release(i < 95 ? 10 : 200, 2 * (i + 1));
    // Four buckets a doubling: within 19% above the true value.
    expect(limiter.p99).toBeGreaterThanOrEqual(200);
    expect(limiter.p99).toBeLessThan(240);
  });

  it('takes no sample from a time that is not one (NaN, infinite, negative)', () => {
    const limiter = new ConcurrencyLimiter({ min: 1, max: 100, initial: 50, targetMs: 50, minSamples: 1, windowMs: 1 });
    limiter.acquire();
    limiter.release(Number.NaN, 10);
    limiter.acquire();
    limiter.release(Number.POSITIVE_INFINITY, 20);
    limiter.acquire();
    limiter.release(-5, 30);
    for (let i = 0; i < 60; i++) limiter.acquire();
    limiter.bind();
    limiter.release(10, 40);
    limiter.release(10, 50);
    expect(Number.isFinite(limiter.limit)).toBe(true);
    expect(limiter.p99).toBeGreaterThan(0);
    expect(limiter.p99).toBeLessThan(12);
  });

  it('takes no sample from a request answered before it was complete', () => {
    const limiter = new ConcurrencyLimiter({ min: 1, max: 10, initial: 10, targetMs: 50, minSamples: 1 });
    limiter.acquire();
    limiter.release(undefined, 1000);
    expect(limiter.inflight).toBe(0);
    expect(limiter.p99).toBe(0);
  });

  it('refuses bounds that do not make sense', () => {
    expect(() => new ConcurrencyLimiter({ min: 0, max: 10, targetMs: 50 })).toThrow(RangeError);
    expect(() => new ConcurrencyLimiter({ min: 10, max: 5, targetMs: 50 })).toThrow(RangeError);
    expect(() => new ConcurrencyLimiter({ min: 1, max: 5, targetMs: 0 })).toThrow(RangeError);
  });
});
