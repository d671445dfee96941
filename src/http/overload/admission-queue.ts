// The requests waiting for a place under the concurrency limit (docs/operations.md#overload): a
// queue bounded by time, after Facebook's CoDel-governed queues ("Fail at Scale"). A request is
// refused only once it cannot be answered within the latency budget any more; until then it
// waits, and a crowd that the instance answers in time is never refused however many it is.
//
// - Normal: first in, first out; a request is refused once it has waited the allowance, the
//   budget less what it still needs once it leaves the queue (the p99 of the service time of the
//   requests just answered), never less than 40% of the budget.
// - Overloaded: once a request has been refused so, or sooner once the queue has stood for half
//   the allowance, more wait than could start within the allowance at the rate requests started
//   in the last step throughout which something waited (what the instance could start, not what
//   was asked of it), and more still arrive than start: the newest are served first (they can
//   still be answered in time), and a request is refused once it has waited the overloaded wait,
//   so that clients hear soon and their connections are free for what they send next. A request
//   is never started once it has waited past the allowance. Back to normal once nothing has
//   been refused for `calmMs`.
//
// What refusing costs: the overloaded wait is the longer of a few ms (`fastMs`) and what keeps
// the refusals within `refusalsPerStart` for each request the instance starts (or within
// `refusalsPerS` a second, 1,000, some 2.5–8% of a core, if that is more; both while the event
// loop is busy, below), given what waits:
// everything waiting, refused once a wait, is length / wait refusals a second. An open loop of
// clients (more arriving than the instance serves, whatever it serves) is refused at the rate its
// excess arrives however long each waits, and its queue shrinks with the wait (length ≈ excess ×
// wait): up to `refusalsPerStart` + 1 times what the instance serves, the wait settles at a few
// ms. Clients that send again as soon as they are refused (a closed loop: a batch job's workers,
// a pool of keep-alive connections, Retry-After ignored) keep the queue as long however short the
// wait: refused after a few ms, each would come back hundreds of times a second and the
// refusals would take the core from the requests it serves (a congestion collapse made by the
// protection itself); the wait grows instead until the refusals are within their share, up to
// the allowance. No closed loop is told from an open one: the bound is on what refusing costs,
// and so it holds only while the process is busy. Where the requests' work is elsewhere (orders
// waiting on one row in the database), the event loop has room, a refusal takes nothing from
// the answers, and the bound widens step by step (up to 16 times) until the loop is busy: an open
// loop that holds all of its clients' connections (their pool bounded, every request waiting
// out the wait) is then refused as fast as it sends, and its backlog drains. (The loop's
// utilization does not see work on other threads: password hashes on libuv's pool.)
//
// Newest first, a closed loop's oldest requests never reach the front, and its refusals would go
// on even once the crowd fits first in, first out (after a stall). So the overloaded queue tries
// the normal regime again once what waits would start within 75% of the allowance at the rate
// requests start (no sooner than `trialMs`, twice the budget, after it became overloaded). The
// trial ends at once, overloaded again, when the oldest has waited twice what that estimate said
// and a quarter of the allowance (more arrives than starts: an open loop, whose admitted requests have
// then waited that long, within the budget), or when it refuses within twice the budget; the next trial then waits twice as long, up
// to 16 times `trialMs`. A trial that holds ends the overloaded regime.
/** How often the queue looks at its oldest while something waits (ms). */
const TICK_MS = 5;
/** How often the rate at which requests start is taken (ms). */
const STEP_MS = 100;
/**
 * The process has room while its event loop is busy less than this share of a step, and is busy
 * past BUSY_ABOVE; the bound on refusals is widened at most ROOM_MAX times.
 */
const ROOM_BELOW = 0.85;
const BUSY_ABOVE = 0.95;
const ROOM_MAX = 16;

export interface Waiting {
  /** When it arrived (ms, performance.now()). */
  readonly at: number;
  /** No longer waiting: started, refused, or its client left. */
  out: boolean;
}

export interface QueueOptions {
  /** The latency budget (ms): LATENCY_BUDGET_MS. */
  budgetMs: number;
  /** What a request needs once it leaves the queue (ms): the service time's p99. */
  serviceMs: () => number;
  /** At most this many wait; past it a request is refused at once. */
  maxLength?: number;
  /** The shortest overloaded wait (ms). */
  fastMs?: number;
  calmMs?: number;
  /** The refusals a second, for each request a second that starts, the overloaded wait keeps to. */
  refusalsPerStart?: number;
  /** The refusals a second the overloaded wait allows whatever starts. */
  refusalsPerS?: number;
  /**
   * How busy the process was since the last call (0–1: the event loop's utilization): while it
   * has room, refusing costs no request its answer, and the bound on refusals widens.
   */
  busy?: () => number;
  /** The least time overloaded before the normal regime is tried again (ms). */
  trialMs?: number;
}

export class AdmissionQueue<T extends Waiting> {
  readonly #items: (T | undefined)[] = [];
  #head = 0;
  /** Waiting, clients gone apart. */
  length = 0;
  readonly maxLength: number;

  readonly #budgetMs: number;
  readonly #serviceMs: () => number;
  readonly #fastMs: number;
  readonly #calmMs: number;
  readonly #refusalsPerStart: number;
  readonly #refusalsPerS: number;
  readonly #trialMs: number;
  readonly #busy: () => number;
  /** How far the bound on refusals is widened while the process has room (1–ROOM_MAX). */
  #room = 1;

  #overloaded = false;
  #lastRefusal = Number.NEGATIVE_INFINITY;
  /** Since when something has waited without a break (ms), +∞ while nothing waits. */
  #standingSince = Number.POSITIVE_INFINITY;
  /**
   * The most that can wait first in, first out and still start within the allowance: the
   * allowance at the rate requests started in the last step throughout which something waited (a
   * rate the instance's capacity set, not its demand), or the higher smoothed rate; +∞ before
   * any such step.
   */
  #fitsLength = Number.POSITIVE_INFINITY;
  /** When #fitsLength was measured: a second later it says nothing of now. */
  #fitsAt = Number.NEGATIVE_INFINITY;
  /** What waited at the timer's last tick: more wait now while more arrive than start. */
  #tickLength = 0;
  /** Requests started in the step, and the rate they started at, smoothed over steps (a second). */
  #stepStart = 0;
  #stepStarts = 0;
  #startsPerS = 0;
  #trialEveryMs: number;
  #nextTrialAt = Number.POSITIVE_INFINITY;
  /** When the normal regime was last tried again, and the wait that ends the trial at once. */
  #trialStartedAt = Number.NEGATIVE_INFINITY;
  #trialLimitMs = 0;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    options: QueueOptions,
    /** Refuses a request that waited too long (or the queue was full). */
    readonly refuse: (item: T) => void,
    /** Called every few ms while something waits: admission starts what it has room for. */
    readonly tick: () => void,
  ) {
    this.#budgetMs = options.budgetMs;
    this.#serviceMs = options.serviceMs;
    this.maxLength = options.maxLength ?? 10_000;
    this.#fastMs = options.fastMs ?? Math.max(1, options.budgetMs / 25);
    this.#calmMs = options.calmMs ?? 500;
    this.#refusalsPerStart = options.refusalsPerStart ?? 4;
    this.#refusalsPerS = options.refusalsPerS ?? 1000;
    this.#trialMs = options.trialMs ?? 2 * options.budgetMs;
    this.#busy = options.busy ?? (() => 1);
    this.#trialEveryMs = this.#trialMs;
  }

  /** The overloaded regime: newest first, refused after the overloaded wait; over once nothing is refused for calmMs. */
  get overloaded(): boolean {
    if (this.#overloaded && performance.now() - this.#lastRefusal > this.#calmMs) this.#calm();
    return this.#overloaded;
  }

  /** How long a request may wait in the normal regime (ms), and the most any may wait to be started. */
  get allowanceMs(): number {
    return Math.max(0.4 * this.#budgetMs, this.#budgetMs - this.#serviceMs());
  }

  /**
   * How long a request may wait overloaded (ms): a few ms, or what refuses everything waiting at
   * most `refusalsPerStart` times for each request started (or `refusalsPerS` a second, if more),
   * that times the room while the event loop has it, up to the allowance.
   */
  get overloadedWaitMs(): number {
    const rate = this.#room * Math.max(this.#refusalsPerS, this.#refusalsPerStart * this.#startsPerS);
    return Math.min(this.allowanceMs, Math.max(this.#fastMs, (1000 * this.length) / rate));
  }

  /** How long a request may wait now before it is refused (ms). */
  get timeoutMs(): number {
    return this.#overloaded ? this.overloadedWaitMs : this.allowanceMs;
  }

  /** Queues `item`; false when the queue is full (refuse it). */
  push(item: T): boolean {
    if (this.length >= this.maxLength) return false;
    this.#items.push(item);
    if (this.length++ === 0) this.#standingSince = item.at;
    if (this.#timer === undefined) {
      const now = performance.now();
      // Idle for over a second: the rate requests started at then says nothing of now.
      if (now - this.#stepStart > 1000) this.#startsPerS = 0;
      this.#stepStart = now;
      this.#stepStarts = 0;
      this.#tickLength = 0;
      this.#busy(); // (its next reading is of the steps from now on)
      this.#room = 1;
      this.#timer = setInterval(() => this.#onTimer(), TICK_MS).unref();
    }
    if (this.length > this.#fitsLength && !this.#overloaded) this.#standsPastWhatFits(item.at);
    return true;
  }

  /**
   * More wait than can start within the allowance in order: if the queue has stood for half the
   * allowance and more still arrive than start, the newest could not be answered in time first
   * in, first out and the oldest will be refused: overloaded now, newest first, rather than once
   * the oldest has waited out the allowance (at three times what the instance serves, an
   * allowance later). A burst that came at once and no more (a pool of connections reopened) is
   * served in order, as much of it as starts in time: newest first, its oldest, all as old,
   * would be refused together within a fifth of the time it takes to drain.
   */
  #standsPastWhatFits(now: number): void {
    if (
      this.length > this.#tickLength &&
      now - this.#fitsAt <= 1000 &&
      now - this.#standingSince >= 0.5 * this.allowanceMs
    )
      this.#refused(now);
  }

  /** A request started at once, not queued: it counts among the starts. */
  passed(): void {
    this.#stepStarts++;
  }

  /** Its client left while it waited: it is skipped. */
  drop(item: T): void {
    if (item.out) return;
    item.out = true;
    this.#left();
  }

  /** One fewer waits. */
  #left(): void {
    if (--this.length === 0) this.#standingSince = Number.POSITIVE_INFINITY;
  }

  /**
   * The next request to start, refusing on the way those that waited too long; undefined when
   * none waits.
   */
  take(now: number): T | undefined {
    this.expire(now);
    while (this.length > 0 && this.#items.length > this.#head) {
      const item = (this.#overloaded ? this.#items.pop() : this.#items[this.#head++]) as T;
      if (item.out) continue;
      item.out = true;
      this.#left();
      // (None left has waited past the allowance: expire() refused those, oldest first.)
      this.#stepStarts++;
      this.#compact();
      return item;
    }
    this.#compact();
    return undefined;
  }

  /** Refuses, oldest first, every request that has waited past the time-out. */
  expire(now: number): void {
    if (this.#overloaded && now - this.#lastRefusal > this.#calmMs) this.#calm();
    if (!this.#overloaded && now - this.#trialStartedAt <= 2 * this.#budgetMs) this.#judgeTrial(now);
    const timeoutMs = this.timeoutMs;
    while (this.length > 0 && this.#head < this.#items.length) {
      const oldest = this.#items[this.#head];
      if (oldest === undefined || oldest.out) {
        this.#head++;
        continue;
      }
      if (now - oldest.at <= timeoutMs) break;
      this.#head++;
      oldest.out = true;
      this.#left();
      this.#refused(now);
      this.refuse(oldest);
    }
    this.#compact();
  }

  /** A request refused because the queue was full counts as a refusal of the queue's. */
  overflowed(now: number): void {
    this.#refused(now);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #refused(now: number): void {
    this.#lastRefusal = now;
    if (this.#overloaded) return;
    // A refusal within a trial of the normal regime: still over what fits.
    if (now - this.#trialStartedAt <= 2 * this.#budgetMs) return this.#trialFailed(now);
    this.#overloaded = true;
    this.#room = 1;
    this.#trialEveryMs = this.#trialMs;
    this.#nextTrialAt = now + this.#trialEveryMs;
  }

  /** A trial of the normal regime failed: overloaded again, and the next trial twice as late. */
  #trialFailed(now: number): void {
    this.#overloaded = true;
    this.#trialStartedAt = Number.NEGATIVE_INFINITY;
    this.#trialEveryMs = Math.min(16 * this.#trialMs, 2 * this.#trialEveryMs);
    this.#nextTrialAt = now + this.#trialEveryMs;
  }

  /**
   * On trial, first in, first out: a queue whose oldest has waited more than twice what it was
   * expected to (more arrives than starts: an open loop) is overloaded again at once, before
   * anything it admits has waited long.
   */
  #judgeTrial(now: number): void {
    const oldest = this.#oldest();
    if (oldest !== undefined && now - oldest.at > this.#trialLimitMs) this.#trialFailed(now);
  }

  #oldest(): T | undefined {
    for (let i = this.#head; i < this.#items.length; i++) {
      const item = this.#items[i];
      if (item !== undefined && !item.out) return item;
    }
    return undefined;
  }

  #calm(): void {
    this.#overloaded = false;
    this.#trialStartedAt = Number.NEGATIVE_INFINITY;
  }

  #onTimer(): void {
    const now = performance.now();
    if (now - this.#stepStart >= STEP_MS) {
      const perS = (1000 * this.#stepStarts) / (now - this.#stepStart);
      // (Something waited throughout the step: what started is what the instance could start. In
      // a stall the smoothed rate falls slower than the stall's, and the higher is taken: a queue
      // longer than it says would wait past the allowance at the stall's rate too.)
      if (this.#standingSince <= this.#stepStart && perS > 0) {
        this.#fitsLength = (Math.max(perS, this.#startsPerS) * this.allowanceMs) / 1000;
        this.#fitsAt = now;
      }
      this.#startsPerS = this.#startsPerS === 0 ? perS : 0.7 * this.#startsPerS + 0.3 * perS;
      this.#stepStart = now;
      this.#stepStarts = 0;
      // (Read at every step, so that each reading is of its step; heeded only while refusing.)
      const busy = this.#busy();
      if (this.#overloaded && this.length > 0) this.#widen(busy);
      // What waits would start within 75% of the allowance, first in, first out: the normal
      // regime again, on trial.
      const drainMs = this.#startsPerS > 0 ? (1000 * this.length) / this.#startsPerS : Number.POSITIVE_INFINITY;
      // (Only while requests start: with every place held, nothing would start in order either.)
      if (this.#overloaded && perS > 0 && now >= this.#nextTrialAt && drainMs <= 0.75 * this.allowanceMs) {
        this.#overloaded = false;
        this.#trialStartedAt = now;
        // (A quarter of the allowance at least: a crowd that fits waits a little longer now and
        // then, as a loaded host or a collection makes it; an open loop's admitted requests wait
        // no more.)
        this.#trialLimitMs = Math.max(2 * drainMs, 2 * this.#fastMs, 0.25 * this.allowanceMs);
      }
    }
    this.tick();
    this.expire(now);
    this.#tickLength = this.length;
    if (this.length === 0 && !this.#overloaded) this.stop();
  }

  /**
   * The bound on refusals, widened by half at each step of an overload in which the process had
   * room (busy under ROOM_BELOW), up to ROOM_MAX times, and halved at each step it was busy past
   * BUSY_ABOVE. Each overload starts from 1, as does the queue after it was idle.
   */
  #widen(busy: number): void {
    if (busy < ROOM_BELOW) this.#room = Math.min(ROOM_MAX, this.#room * 1.5);
    else if (busy > BUSY_ABOVE) this.#room = Math.max(1, this.#room / 2);
  }

  /** How far the bound on refusals is widened now (1 while the process is busy). */
  get room(): number {
    return this.#room;
  }

  #compact(): void {
    if (this.#head === this.#items.length) {
      this.#items.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
  }
}
