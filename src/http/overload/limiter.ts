// An adaptive limit on the requests in flight (docs/operations.md, "Overload"): a gradient
// controller after Netflix's concurrency-limits (Gradient2Limit). No requests-per-second number
// is set by hand: the limit follows the latency of the requests it admits.
//
// Each window (at least `windowMs` and `minSamples` answers) gives a short-term latency, the
// window's mean; a long-term one follows it slowly (an exponential average over `longWindow`
// windows: about a minute), so that sustained overload cannot ratchet it up quickly. While the short term holds near the long term, the limit grows by about its square
// root a window (the queue a service may hold without harm); when it rises past `tolerance`
// times the long term (never less than `floorMs`), requests are queueing somewhere (a saturated core, a hot row's lock, a
// pool with no free connection) and the limit shrinks in proportion, at most halving. The long
// term is pulled down at once when latency falls back, so that the limit recovers in a few
// windows after the load has passed. A window in which fewer than half the limit were ever in
// flight says nothing about the limit (the service was not the bottleneck): it changes nothing.
//
// Latency from admission to answer misses one queue: the requests waiting unread in the sockets
// of a process whose core is full. A single-threaded server reads its sockets once a turn of the
// event loop, so that wait is the length of a turn, which the loop's delay measures. When told
// it (heedLoopDelay), a window whose delay passes its target shrinks the limit at once in
// proportion (at most halving it; not smoothed), and one past half of it lets the limit hold but
// not grow: the admitted work then leaves the core room to read and refuse the rest in time.

export interface LimiterOptions {
  min: number;
  max: number;
  /** The limit before any measurement. */
  initial?: number;
  /** The shortest window, in ms. */
  windowMs?: number;
  /** Answers a window needs before it counts. */
  minSamples?: number;
  /** How far the short-term latency may rise over the long-term one before the limit shrinks. */
  tolerance?: number;
  /** Windows the long-term latency averages over. */
  longWindow?: number;
  /** How much of each new estimate the limit takes (0–1). */
  smoothing?: number;
  /**
   * A latency (ms) below which requests are never taken to be queueing: the long term is at
   * least this. A saturated core under a fixed crowd of clients (a closed-loop benchmark, a busy
   * hour) answers in a few ms more than an idle one; shedding there would refuse work the
   * instance does in time.
   */
  floorMs?: number;
}

export class ConcurrencyLimiter {
  readonly min: number;
  readonly max: number;
  #limit: number;
  /** The whole part of the limit: what admission compares with. */
  #ceiling: number;
  inflight = 0;

  readonly #windowMs: number;
  readonly #minSamples: number;
  readonly #tolerance: number;
  readonly #longWindow: number;
  readonly #smoothing: number;
  readonly #floorMs: number;
  #loopDelay: (() => number) | undefined;
  #loopDelayTargetMs = 50;

  #windowStart = 0;
  #windowSum = 0;
  #windowCount = 0;
  #windowPeak = 0;
  #windows = 0;
  #long = 0;
  #short = 0;

  constructor(options: LimiterOptions) {
    if (!(options.min >= 1) || !(options.max >= options.min))
      throw new RangeError(`the limit's bounds must satisfy 1 <= min <= max (min ${options.min}, max ${options.max})`);
    this.min = options.min;
    this.max = options.max;
    this.#limit = Math.min(options.max, Math.max(options.min, options.initial ?? 100));
    this.#ceiling = Math.floor(this.#limit);
    this.#windowMs = options.windowMs ?? 100;
    this.#minSamples = options.minSamples ?? 10;
    this.#tolerance = options.tolerance ?? 2;
    this.#longWindow = options.longWindow ?? 600;
    this.#smoothing = options.smoothing ?? 0.2;
    this.#floorMs = options.floorMs ?? 25;
  }

  /**
   * From now on, heeds the event loop's delay: `loopDelay` says it for the window just ended (ms;
   * called once a window), `targetMs` the delay past which the limit shrinks. Until then, latency
   * alone steers the limit.
   */
  heedLoopDelay(loopDelay: () => number, targetMs: number): void {
    this.#loopDelay = loopDelay;
    this.#loopDelayTargetMs = targetMs;
  }

  /** The current limit. */
  get limit(): number {
    return this.#ceiling;
  }

  /** The latency of the last window, and the long-term one (ms; 0 before any). */
  get latency(): { short: number; long: number } {
    return { short: this.#short, long: this.#long };
  }

  /** Takes a place if one is free (then `release` it once answered); false: refuse the request. */
  tryAcquire(): boolean {
    if (this.inflight >= this.#ceiling) return false;
    this.inflight++;
    if (this.inflight > this.#windowPeak) this.#windowPeak = this.inflight;
    return true;
  }

  /** An admitted request was answered after `latencyMs`, at `now` (ms, any monotonic clock). */
  release(latencyMs: number, now: number): void {
    this.inflight--;
    this.#windowSum += latencyMs;
    this.#windowCount++;
    if (this.#windowCount >= this.#minSamples && now - this.#windowStart >= this.#windowMs) this.#update(now);
  }

  /** A request admitted and then not answered (its client left before it started): no sample. */
  cancel(): void {
    this.inflight--;
  }

  #update(now: number): void {
    const short = this.#windowSum / this.#windowCount;
    const peak = this.#windowPeak;
    this.#windowStart = now;
    this.#windowSum = 0;
    this.#windowCount = 0;
    this.#windowPeak = this.inflight;
    this.#short = short;

    // The long term: the first windows set it, then it follows slowly; it falls at once to a
    // short term far below it (the load has passed).
    this.#windows++;
    if (this.#windows <= 3) this.#long = this.#windows === 1 ? short : (this.#long + short) / 2;
    else this.#long += (short - this.#long) / this.#longWindow;
    if (this.#long > 2 * short) this.#long = 0.9 * this.#long + 0.1 * short;
    if (this.#long > 2 * short) this.#long = 2 * short;

    // The loop behind its target: fewer in flight, at once.
    const delay = this.#loopDelay?.() ?? 0;
    if (delay > this.#loopDelayTargetMs) {
      this.#limit = Math.max(this.min, this.#limit * Math.max(0.5, this.#loopDelayTargetMs / delay));
      this.#ceiling = Math.floor(this.#limit);
      return;
    }

    const reference = Math.max(this.#long, this.#floorMs);
    const gradient = Math.max(0.5, Math.min(1, (this.#tolerance * reference) / Math.max(short, 1e-3)));
    // Not the bottleneck this window (little was in flight) and not slow: nothing learned.
    if (peak < this.#limit / 2 && gradient === 1) return;
    // The loop past half its target: no room to admit more.
    if (gradient === 1 && delay > this.#loopDelayTargetMs / 2) return;
    const next = this.#limit * gradient + (gradient === 1 ? Math.sqrt(this.#limit) : 0);
    const limit = this.#limit * (1 - this.#smoothing) + next * this.#smoothing;
    this.#limit = Math.min(this.max, Math.max(this.min, limit));
    this.#ceiling = Math.floor(this.#limit);
  }
}
