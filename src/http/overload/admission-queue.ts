// The requests waiting for a place under the concurrency limit (docs/operations.md#overload): a
// queue bounded by time, after Facebook's CoDel-governed queues ("Fail at Scale"). A request is
// refused only once it cannot be answered within the latency budget any more; until then it
// waits, and a crowd that the instance answers in time is never refused however many it is.
//
// - Normal: first in, first out; a request is refused once it has waited the allowance, the
//   budget less what it still needs once it leaves the queue (the p99 of the service time of the
//   requests just answered), never less than 40% of the budget.
// - Overloaded: once a request has been refused so, the queue stands above what fits: the newest
//   are served first (they can still be answered in time), and a request is refused once it has
//   waited the overloaded wait, a few ms at first, so that clients hear at once and their
//   connections are free for what they send next. A request is never started once it has waited
//   past the allowance. Back to normal once nothing has been refused for `calmMs`.
//
// What refusing costs: the overloaded wait is steered by the refusals it makes. Clients that send
// again as soon as they are refused (a closed loop: a batch job's workers, a pool of keep-alive
// connections, Retry-After ignored) come back at once, so a short wait refuses each of them
// hundreds of times a second, and the refusals take the core from the requests it serves (a
// congestion collapse made by the protection itself). An open loop of clients (more arriving
// than the instance answers, whatever it answers) is refused at the rate its excess arrives,
// however long each waits. So while the refusals cost more than a little (`refusalsPerS` and
// more), or before it has looked, the queue tries twice the wait for a step (more, up to eight
// times, once it knows a closed loop), counted once every request has waited the new wait out: if the refusals fell, they came
// from a closed loop, and the longer wait is kept (the clients refused later come back less
// often; the newest are still served first, so no admitted answer comes later); if not, the wait
// goes back to a few ms and is tried again later (after 1 s, doubling up to 8 s), as waiting
// longer only delays an open loop's refusals and holds its connections. Up to `maxWaitMs`. Once
// the refusals are well within their share, half the wait is tried now and then: kept if the
// refusals do not rise by a quarter (the crowd shrank, or an open loop took its place).
//
// A closed loop keeps the newest-first order's refusals coming (the oldest never reach the
// front), even once the crowd would fit first in, first out (after a stall): a queue that found a
// closed loop tries the normal regime again as soon as what waits would start within 75% of the
// allowance first in, first out, at the rate requests started in the last step. A trial that
// refuses within twice the budget brings the overloaded wait back at once, and the next trial
// waits `trialMs` (twice the budget), doubling up to 16 times; one that refuses nothing stays.
/** How often the queue looks at its oldest while something waits (ms). */
const TICK_MS = 5;
/**
 * How often the overloaded wait is reconsidered (ms): every STEP_MS, or every two waits when
 * that is longer (a crowd refused together comes back in waves, one a wait: a step counts two or
 * three, so twice the wait reads as 0.33–0.75 of the refusals, under FELL).
 */
const STEP_MS = 100;
/** A step with fewer refusals than this says nothing of the loop. */
const STEP_REFUSALS = 20;
/**
 * A longer wait that left the refusals above this share of what they were did not lower them. (A
 * closed loop's clients spend their round trip too: twice a wait as short as the round trip
 * lowers its refusals by a quarter, not by half.)
 */
const FELL = 0.8;
/** The first back-off before an open loop's wait is tried longer again, and the last (ms). */
const PROBE_BACKOFF_MS = [1000, 8000] as const;

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
  /** The overloaded wait to begin with (ms). */
  fastMs?: number;
  /** The longest overloaded wait (ms). */
  maxWaitMs?: number;
  calmMs?: number;
  /** The refusals a second above which a longer overloaded wait is tried. */
  refusalsPerS?: number;
  /** The first interval after a trial of the normal regime that refused before the next (ms). */
  trialMs?: number;
}

/** The queue's regime: normal, or overloaded (with what the overloaded wait found). */
export type Regime = 'normal' | 'overloaded' | 'closed_loop';

export class AdmissionQueue<T extends Waiting> {
  readonly #items: (T | undefined)[] = [];
  #head = 0;
  /** Waiting, clients gone apart. */
  length = 0;
  readonly maxLength: number;
  /** Refusals of the queue's (waited too long, or the queue was full), since it was made. */
  refusals = 0;

  readonly #budgetMs: number;
  readonly #serviceMs: () => number;
  readonly #fastMs: number;
  readonly #maxWaitMs: number;
  readonly #calmMs: number;
  readonly #refusalsPerS: number;
  readonly #trialMs: number;

  #overloaded = false;
  #lastRefusal = Number.NEGATIVE_INFINITY;
  /** The overloaded wait (ms). */
  #waitMs: number;
  /** A longer wait being tried: the refusals a second before it, and the wait to go back to. */
  #probe: { before: number; from: number } | undefined;
  /**
   * A step that begins before this says nothing (ms): the overloaded wait changed, and until
   * every request has waited the new one out, its refusals are only sooner or later, not more or
   * fewer.
   */
  #settledAt = 0;
  #nextProbeAt = 0;
  #probeBackoffMs: number = PROBE_BACKOFF_MS[0];
  /** Probes of an unknown loop that found no fall in a row (each tries a longer wait). */
  #failedProbes = 0;
  /** A longer wait lowered the refusals: the clients are a closed loop. */
  #closedLoop = false;
  #stepStart = 0;
  #stepRefusals = 0;
  /** Requests the queue gave to start in the step. */
  #stepStarts = 0;
  #trialEveryMs: number;
  #nextTrialAt = 0;
  /** When the normal regime was last tried again, and the overloaded wait then. */
  #trialStartedAt = Number.NEGATIVE_INFINITY;
  #trialWaitMs = 0;
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
    this.#maxWaitMs = Math.max(this.#fastMs, options.maxWaitMs ?? 4 * options.budgetMs);
    this.#calmMs = options.calmMs ?? 500;
    this.#refusalsPerS = options.refusalsPerS ?? 2000;
    this.#trialMs = options.trialMs ?? 2 * options.budgetMs;
    this.#trialEveryMs = this.#trialMs;
    this.#waitMs = this.#fastMs;
  }

  /** The overloaded regime: newest first, refused after the overloaded wait; over once nothing is refused for calmMs. */
  get overloaded(): boolean {
    if (this.#overloaded && performance.now() - this.#lastRefusal > this.#calmMs) this.#calm();
    return this.#overloaded;
  }

  /** The regime now; `closed_loop`: overloaded, and a longer wait was found to lower the refusals. */
  get regime(): Regime {
    if (!this.overloaded) return 'normal';
    return this.#closedLoop ? 'closed_loop' : 'overloaded';
  }

  /** How long a request may wait in the normal regime (ms), and the most any may wait to be started. */
  get allowanceMs(): number {
    return Math.max(0.4 * this.#budgetMs, this.#budgetMs - this.#serviceMs());
  }

  /** How long a request may wait now before it is refused (ms). */
  get timeoutMs(): number {
    return this.#overloaded ? this.#waitMs : this.allowanceMs;
  }

  /** Queues `item`; false when the queue is full (refuse it). */
  push(item: T): boolean {
    if (this.length >= this.maxLength) return false;
    this.#items.push(item);
    this.length++;
    if (this.#timer === undefined) this.#timer = setInterval(() => this.#onTimer(), TICK_MS).unref();
    return true;
  }

  /** Its client left while it waited: it is skipped. */
  drop(item: T): void {
    if (item.out) return;
    item.out = true;
    this.length--;
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
      this.length--;
      // Newest first, the newest may still have waited past what can be answered in time (the
      // overloaded wait may be longer than the allowance): refused, not started.
      if (now - item.at > this.allowanceMs) {
        this.#refused(now);
        this.refuse(item);
        continue;
      }
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
    while (this.length > 0 && this.#head < this.#items.length) {
      const oldest = this.#items[this.#head];
      if (oldest === undefined || oldest.out) {
        this.#head++;
        continue;
      }
      if (now - oldest.at <= this.timeoutMs) break;
      this.#head++;
      oldest.out = true;
      this.length--;
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
    this.refusals++;
    this.#stepRefusals++;
    this.#lastRefusal = now;
    if (this.#overloaded) return;
    this.#overloaded = true;
    this.#stepStart = now;
    this.#stepRefusals = 1;
    this.#probe = undefined;
    if (now - this.#trialStartedAt <= 2 * this.#budgetMs) {
      // The trial of the normal regime refused: the closed loop is still over what fits. Its wait
      // back, and the next trial later.
      this.#waitMs = this.#trialWaitMs;
      this.#trialEveryMs = Math.min(16 * this.#trialMs, 2 * this.#trialEveryMs);
      this.#nextTrialAt = now + this.#trialEveryMs;
    } else {
      this.#waitMs = this.#fastMs;
      this.#closedLoop = false;
      this.#nextProbeAt = now;
      this.#probeBackoffMs = PROBE_BACKOFF_MS[0];
      this.#failedProbes = 0;
      this.#trialEveryMs = this.#trialMs;
      this.#nextTrialAt = now;
    }
    this.#trialStartedAt = Number.NEGATIVE_INFINITY;
    // What stood in the queue in the normal regime is refused at once as the wait shortens.
    this.#settledAt = now + this.#waitMs;
  }

  #calm(): void {
    this.#overloaded = false;
    this.#closedLoop = false;
    this.#probe = undefined;
    this.#waitMs = this.#fastMs;
    this.#trialStartedAt = Number.NEGATIVE_INFINITY;
  }

  /** Every step while overloaded: the overloaded wait from the refusals it made. */
  #step(now: number): void {
    const stepStart = this.#stepStart;
    const perS = (1000 * this.#stepRefusals) / (now - stepStart);
    const enough = this.#stepRefusals >= STEP_REFUSALS;
    // How long the requests waiting now would take to start, first in, first out, at the rate
    // they started in the step.
    const drainMs =
      this.#stepStarts === 0 ? Number.POSITIVE_INFINITY : (this.length * (now - stepStart)) / this.#stepStarts;
    // Refusing many times what it starts, and more than the share: the core goes to refusals
    // (an open loop does so only past five times what the instance serves).
    const spinning = perS > this.#refusalsPerS && this.#stepRefusals > 4 * this.#stepStarts;
    this.#stepStart = now;
    this.#stepRefusals = 0;
    this.#stepStarts = 0;
    const probe = this.#probe;
    console.error(
      `step ${now.toFixed(0)} len ${now - stepStart} perS ${perS.toFixed(0)} wait ${this.#waitMs} q ${this.length} closed ${this.#closedLoop} probe ${JSON.stringify(probe)} settled ${stepStart >= this.#settledAt} fp ${this.#failedProbes}`,
    );
    if (stepStart < this.#settledAt) return;
    if (probe !== undefined) {
      this.#probe = undefined;
      if (probe.from < this.#waitMs) {
        if (perS <= FELL * probe.before) {
          // Fewer refusals with the longer wait: a closed loop. Kept; longer again at once if the
          // refusals still cost more than their share.
          this.#closedLoop = true;
          this.#failedProbes = 0;
          this.#nextProbeAt = now;
        } else {
          // As many refusals: an open loop (now, if it was closed before), whose excess a
          // longer wait only delays.
          this.#closedLoop = false;
          this.#failedProbes++;
          this.#waitMs = this.#fastMs;
          this.#settledAt = now + this.#waitMs;
          this.#nextProbeAt = now + this.#probeBackoffMs;
          this.#probeBackoffMs = Math.min(PROBE_BACKOFF_MS[1], 2 * this.#probeBackoffMs);
        }
      } else if (FELL * perS >= probe.before) {
        // More refusals with the shorter wait: still a closed loop, the longer wait back.
        this.#waitMs = probe.from;
        this.#settledAt = now + this.#waitMs;
        this.#nextProbeAt = now + this.#probeBackoffMs;
        this.#probeBackoffMs = Math.min(PROBE_BACKOFF_MS[1], 2 * this.#probeBackoffMs);
      } else if (this.#waitMs === this.#fastMs) this.#closedLoop = false;
      return;
    }
    if (this.#closedLoop && now >= this.#nextTrialAt && drainMs <= 0.75 * this.allowanceMs) {
      // A closed loop that would fit first in, first out by now (its queue would start within
      // the allowance, with room to spare): the normal regime again. The overloaded wait is kept
      // for the moment the trial refuses.
      this.#overloaded = false;
      this.#trialStartedAt = now;
      this.#trialWaitMs = this.#waitMs;
      return;
    }
    if (now < this.#nextProbeAt && !(spinning && !this.#closedLoop)) return;
    if (perS > this.#refusalsPerS || (!this.#closedLoop && enough)) {
      if (this.#waitMs >= this.#maxWaitMs) return;
      // While the loop is not known, twice the wait, then four and eight times after probes that
      // found no fall: an open loop's requests hold their connections that much longer for the
      // step, but a closed loop whose refusals fill the core (each refusal waits its turn of the
      // loop too) refuses as many at twice the wait while it still asks more than the core can
      // refuse. Spinning, eight times at once, whatever the back-off. A closed loop's refusals
      // fall as the wait grows: at once nearly to where they are within their share (up to 8).
      const factor = this.#closedLoop
        ? Math.min(8, Math.max(2, perS / this.#refusalsPerS))
        : spinning
          ? 8
          : 2 ** Math.min(3, this.#failedProbes + 1);
      this.#try(now, perS, Math.min(this.#maxWaitMs, factor * this.#waitMs));
    } else if (this.#closedLoop && perS < this.#refusalsPerS / 2 && this.#waitMs > this.#fastMs) {
      // Well within the share: is the longer wait still what keeps the refusals down (the crowd
      // may have shrunk, or given way to an open loop)? Half of it, for a step.
      this.#try(now, perS, Math.max(this.#fastMs, this.#waitMs / 2));
    }
  }

  /** Tries another overloaded wait for a step. */
  #try(now: number, perS: number, waitMs: number): void {
    this.#probe = { before: perS, from: this.#waitMs };
    this.#waitMs = waitMs;
    this.#settledAt = now + Math.max(waitMs, this.#probe.from);
  }

  #onTimer(): void {
    const now = performance.now();
    if (this.#overloaded && now - this.#stepStart >= Math.max(STEP_MS, 2 * this.#waitMs)) this.#step(now);
    this.tick();
    this.expire(now);
    if (this.length === 0 && !this.#overloaded) this.stop();
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
