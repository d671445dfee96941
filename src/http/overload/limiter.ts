// The limit on requests executing at once (docs/operations.md#overload), set from what the
// instance delivers, after TCP BBR: its recent peak throughput.
// No requests-per-second number is set by hand, and the level of latency never moves it (only its
// spread scales it, between a half and one, below): latency that rises for another reason (a
// host that takes the core away, dearer requests, work the instance spends refusing) would
// otherwise ratchet the limit down while throughput falls with it.
//
// By Little's law, requests executing = throughput × mean service time. Past the knee (the core
// or a hot row saturated), throughput stays at its peak X and every request more in flight only
// adds to everyone's service time: the limit X × target × (mean / p99 of the service time) keeps
// the service time's p99 at the target (40% of the latency budget) while the mean is at least
// half the p99 (requests waiting on one row's lock in turn spread from near nothing to the whole
// line's time; evenly spread, the mean is half the p99), and what is over the limit waits in the
// admission queue (admission-queue.ts), which refuses only what could not be answered in time:
// the queue leaves a request the budget less that p99. (The p99 is its bucket's upper bound, up
// to 19% over the true one, so the factor reads 0.84–1 for service times that do not spread at
// all: the p99 is held at 0.84–1 times the target.) The factor is never under a half (an even
// spread): where the p99 belongs to a few requests of another kind (password hashes among
// reads), the mean over it says nothing of how the rest spread, and the limit would fall to its
// floor for them. Below the knee, throughput grows with the limit, and so does the limit (at
// most doubling a window). Requests that take longer alone than the target (a password hash)
// keep CONCURRENCY_LIMIT_MIN places at least: keep it above the knee of such work (the hashing
// threads, the database connections).
//
// Each window (at least `windowMs` and `minSamples` answers) gives the throughput and the
// service times (from the complete request to its answer: a client that sends its body slowly
// spends its own time, not the instance's) of the requests answered in it. The limit moves only
// after a window in which it bound (a request waited for a place, or every place was taken): a
// window of less demand says nothing about what the instance can deliver. The peak is of the
// windows of the last 2 s by the clock: a quiet spell forgets it, and no window spans one.

export interface LimiterOptions {
  min: number;
  max: number;
  /** The service time (ms) the limit keeps requests to once the instance is saturated. */
  targetMs: number;
  /** The limit before any measurement. */
  initial?: number;
  /** The shortest window, in ms. */
  windowMs?: number;
  /** Answers a window needs before it counts. */
  minSamples?: number;
}

/** Log-scale buckets of service time: four a doubling, from 0.25 ms up to about 16 s. */
const BUCKETS = 64;
const BUCKET_BASE_MS = 0.25;
const bucketOf = (ms: number): number =>
  ms <= BUCKET_BASE_MS ? 0 : Math.min(BUCKETS - 1, Math.floor(4 * Math.log2(ms / BUCKET_BASE_MS)));
const upperBoundOf = (bucket: number): number => BUCKET_BASE_MS * 2 ** ((bucket + 1) / 4);

/** The least the mean over the p99 of the service time is taken as (an even spread). */
const MIN_SPREAD = 0.5;

/**
 * The peak throughput is the most of the windows that ended in the last 2 s: after a quiet spell
 * the instance's peak before it says nothing of what it delivers now (a database slowed since, a
 * dearer mix), and a limit set from it would keep requests in flight for longer than the target
 * until 2 s of new windows had replaced it.
 */
const PEAK_MS = 2000;

export class ConcurrencyLimiter {
  readonly min: number;
  readonly max: number;
  readonly targetMs: number;
  #limit: number;
  /** Requests holding a place. */
  inflight = 0;

  readonly #windowMs: number;
  readonly #minSamples: number;
  readonly #histogram = new Uint32Array(BUCKETS);
  #count = 0;
  /** The service times of the window, summed (ms). */
  #sum = 0;
  #windowStart = Number.NaN;
  #bound = false;
  #windows = 0;
  #p99 = 0;
  /** The service time's mean over its p99 (at least MIN_SPREAD), smoothed over windows. */
  #spread = 1;
  /** Throughput (answers/s) of the windows that bound in the last PEAK_MS, and when each ended. */
  readonly #rates: { at: number; perS: number }[] = [];
  /** When the last answer came, and whether it left nothing in flight. */
  #lastRelease = Number.NaN;
  #leftIdle = false;
  /** An idle spell ended: the next answer with a service time starts a new window. */
  #afterSpell = false;

  constructor(options: LimiterOptions) {
    if (!(options.min >= 1) || !(options.max >= options.min))
      throw new RangeError(`the limit's bounds must satisfy 1 <= min <= max (min ${options.min}, max ${options.max})`);
    if (!(options.targetMs > 0)) throw new RangeError(`the target must be positive (got ${options.targetMs})`);
    this.min = options.min;
    this.max = options.max;
    this.targetMs = options.targetMs;
    this.#limit = Math.min(options.max, Math.max(options.min, Math.floor(options.initial ?? 100)));
    this.#windowMs = options.windowMs ?? 100;
    this.#minSamples = options.minSamples ?? 10;
  }

  /** The current limit. */
  get limit(): number {
    return this.#limit;
  }

  /** The service time's p99, smoothed over windows (ms; 0 before any): what the queue leaves for it. */
  get p99(): number {
    return this.#p99;
  }

  /** The peak throughput the limit is set from (answers/s; 0 before any window that bound). */
  get peakPerSecond(): number {
    return this.#rates.reduce((peak, { perS }) => Math.max(peak, perS), 0);
  }

  /** Takes a place if one is free (then `release` it once answered); false: the request must wait. */
  tryAcquire(): boolean {
    if (this.inflight >= this.#limit) {
      this.#bound = true;
      return false;
    }
    this.acquire();
    return true;
  }

  /** Takes a place whatever the limit (protection off, or a request leaving the queue). */
  acquire(): void {
    this.inflight++;
    if (this.inflight >= this.#limit) this.#bound = true;
  }

  /** A request had to wait for a place: the limit is binding. */
  bind(): void {
    this.#bound = true;
  }

  /**
   * A request gave its place back at `now` (ms, any monotonic clock), answered `serviceMs` after
   * it was complete; undefined when there is no such time (it was answered before its body came).
   */
  release(serviceMs: number | undefined, now: number): void {
    this.inflight--;
    // Idle (the last answer left nothing in flight) for longer than a window: the next window
    // starts with the next answer, so that its rate is of the answers since, not of the quiet
    // spell, nor of the first requests' service time, in which none could come. (A stall,
    // requests in flight and no answer, stays in the window. One that began as the instance
    // emptied does not: the peak, a maximum, never heeded a stall's low rate anyway. Answers
    // further apart than a window, one at a time, complete no window: the p99 stays as the last
    // busy window left it.)
    if (this.#leftIdle && now - this.#lastRelease > this.#windowMs) this.#afterSpell = true;
    this.#lastRelease = now;
    this.#leftIdle = this.inflight === 0;
    // (Nor from a time that is no time: one NaN would make the limit NaN, which nothing reaches.)
    if (serviceMs === undefined || !Number.isFinite(serviceMs) || serviceMs < 0) return;
    if (Number.isNaN(this.#windowStart) || this.#afterSpell) this.#restart(now);
    (this.#histogram[bucketOf(serviceMs)] as number)++;
    this.#count++;
    this.#sum += serviceMs;
    if (this.#count >= this.#minSamples && now - this.#windowStart >= this.#windowMs) this.#update(now);
  }

  /**
   * A new window from `start`, what the last one held dropped, its binding too (a request that
   * waited before the spell says nothing of the demand after it; one that waits now binds it
   * again at once).
   */
  #restart(start: number): void {
    this.#histogram.fill(0);
    this.#count = 0;
    this.#sum = 0;
    this.#bound = false;
    this.#windowStart = start;
    this.#afterSpell = false;
  }

  #quantile(q: number): number {
    const rank = Math.ceil(q * this.#count);
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.#histogram[i] as number;
      if (seen >= rank) return upperBoundOf(i);
    }
    return upperBoundOf(BUCKETS - 1);
  }

  #update(now: number): void {
    const rate = (1000 * this.#count) / (now - this.#windowStart);
    const p99 = this.#quantile(0.99);
    // (The mean can pass the p99 where the top 1% is far out: the factor is at most 1.)
    const spread = Math.max(MIN_SPREAD, Math.min(1, this.#sum / this.#count / p99));
    const bound = this.#bound || this.inflight >= this.#limit;
    this.#histogram.fill(0);
    this.#count = 0;
    this.#sum = 0;
    this.#windowStart = now;
    this.#bound = false;
    const first = this.#windows++ === 0;
    this.#p99 = first ? p99 : 0.7 * this.#p99 + 0.3 * p99;
    this.#spread = first ? spread : 0.7 * this.#spread + 0.3 * spread;
    if (!bound) return;
    this.#rates.push({ at: now, perS: rate });
    while ((this.#rates[0]?.at ?? now) < now - PEAK_MS) this.#rates.shift();
    const wanted = (this.peakPerSecond * this.targetMs * this.#spread) / 1000;
    const next = Math.min(2 * this.#limit, Math.max(this.#limit / 2, wanted));
    this.#limit = Math.min(this.max, Math.max(this.min, Math.round(next)));
  }
}
