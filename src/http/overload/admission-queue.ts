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
//   waited `fastMs`, so that clients hear at once and their connections are free for what they
//   send next (an open loop of clients does not wait for answers to send more). Back to normal
//   once nothing has been refused for `calmMs`.
// - Held: a fast refusal helps only clients that do not send again at once. When nearly every
//   open connection is busy (`saturated` of them: a request in the instance, or one answered
//   a moment ago) through `probationMs` of the overloaded regime, the clients are a
//   closed loop (a crowd that sends again as soon as it is answered, Retry-After or not):
//   refusing them only makes them come back, and the refusals take the core from the requests
//   it serves, while the crowd's answers come no sooner. The queue then stays in the normal
//   regime for `holdMs` (doubled each time the closed loop is found again, up to 8 times), and
//   refuses only what would pass twice the budget; then it looks again. Only a crowd is held:
//   busy connections enough that refusing each at once would refuse `SPIN_PER_S` a second or
//   more. Fewer cost the core little refused at once (32 clients every 8 ms ≈ 4,000 a second,
//   ~10% of a core at 25 µs each), and a handful of busy connections says nothing of the loop.
/** How often the queue looks at its oldest while something waits (ms). */
const TICK_MS = 5;
/** The looks at the connections a probation takes at least. */
const PROBATION_LOOKS = 5;
/** The least refusal rate (a second) a held crowd would make, refused at once. */
const SPIN_PER_S = 2000;

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
  /**
   * The open connections, and how many are busy: with a request in the instance, or one answered
   * within the last `recentMs` (a closed loop's next request may wait unread in its socket while
   * the loop is behind). The closed-loop test.
   */
  connections: (recentMs: number) => { busy: number; open: number };
  /** At most this many wait; past it a request is refused at once. */
  maxLength?: number;
  fastMs?: number;
  calmMs?: number;
  probationMs?: number;
  holdMs?: number;
  saturated?: number;
}

export class AdmissionQueue<T extends Waiting> {
  readonly #items: (T | undefined)[] = [];
  #head = 0;
  /** Waiting, clients gone apart. */
  length = 0;
  readonly maxLength: number;

  readonly #budgetMs: number;
  readonly #serviceMs: () => number;
  readonly #connections: (recentMs: number) => { busy: number; open: number };
  readonly #fastMs: number;
  readonly #calmMs: number;
  readonly #probationMs: number;
  readonly #holdMs: number;
  readonly #saturated: number;

  #overloaded = false;
  #overloadedSince = 0;
  #lastRefusal = Number.NEGATIVE_INFINITY;
  #heldUntil = Number.NEGATIVE_INFINITY;
  #holds = 0;
  #samples = 0;
  #saturatedSamples = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #lastTick = 0;

  constructor(
    options: QueueOptions,
    /** Refuses a request that waited too long (or the queue was full). */
    readonly refuse: (item: T) => void,
    /** Called every few ms while something waits: admission starts what it has room for. */
    readonly tick: () => void,
  ) {
    this.#budgetMs = options.budgetMs;
    this.#serviceMs = options.serviceMs;
    this.#connections = options.connections;
    this.maxLength = options.maxLength ?? 10_000;
    this.#fastMs = options.fastMs ?? Math.max(1, options.budgetMs / 25);
    this.#calmMs = options.calmMs ?? 500;
    this.#probationMs = options.probationMs ?? 100;
    this.#holdMs = options.holdMs ?? 5000;
    this.#saturated = options.saturated ?? 0.8;
  }

  /** The overloaded regime: newest first, refused after fastMs; over once nothing is refused for calmMs. */
  get overloaded(): boolean {
    if (this.#overloaded && performance.now() - this.#lastRefusal > this.#calmMs) this.#calm();
    return this.#overloaded;
  }

  /** How long a request may wait in the normal regime (ms). */
  get allowanceMs(): number {
    // A closed loop's clients come back as soon as they are refused: refusing one whose answer
    // would come late does not make anyone's answer come sooner, only costs the core. Held, the
    // queue refuses only what would pass twice the budget.
    const budget = this.held ? 2 * this.#budgetMs : this.#budgetMs;
    return Math.max(0.4 * budget, budget - this.#serviceMs());
  }

  /** Held in the normal regime: the clients were found to be a closed loop. */
  get held(): boolean {
    return performance.now() < this.#heldUntil;
  }

  /** How long a request may wait now (ms). */
  get timeoutMs(): number {
    return this.#overloaded ? this.#fastMs : this.allowanceMs;
  }

  /** Queues `item`; false when the queue is full (refuse it). */
  push(item: T): boolean {
    if (this.length >= this.maxLength) return false;
    this.#items.push(item);
    this.length++;
    if (this.#timer === undefined) {
      this.#lastTick = performance.now();
      this.#timer = setInterval(() => this.#onTimer(), TICK_MS).unref();
    }
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
    this.#lastRefusal = now;
    if (this.#overloaded || now < this.#heldUntil) return;
    this.#overloaded = true;
    this.#overloadedSince = now;
    this.#samples = 0;
    this.#saturatedSamples = 0;
  }

  #calm(): void {
    this.#overloaded = false;
    this.#holds = 0;
  }

  #onTimer(): void {
    const now = performance.now();
    // How late the timer is tells how long a request may wait unread while the loop is behind.
    const turnMs = now - this.#lastTick;
    this.#lastTick = now;
    if (this.#overloaded) {
      // Is it a closed loop? Nearly every connection busy, and a crowd of them. (The window: a
      // closed loop's next request arrives within a turn or two of its answer.)
      this.#samples++;
      const { busy, open } = this.#connections(Math.max(10, 2 * turnMs));
      if (busy >= this.#saturated * open && busy * (1000 / this.#fastMs) >= SPIN_PER_S) this.#saturatedSamples++;
      // (At least a few looks: a loop that is behind may tick once in the whole probation.)
      if (now - this.#overloadedSince >= this.#probationMs && this.#samples >= PROBATION_LOOKS) {
        if (this.#saturatedSamples >= 0.8 * this.#samples) {
          this.#overloaded = false;
          this.#heldUntil = now + this.#holdMs * 2 ** Math.min(this.#holds, 3);
          this.#holds++;
        }
        this.#overloadedSince = now;
        this.#samples = 0;
        this.#saturatedSamples = 0;
      }
    } else if (now - this.#lastRefusal > 4 * this.#calmMs) this.#holds = 0;
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
