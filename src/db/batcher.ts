// Group commit: calls that arrive while the database is busy share one statement. Most of a
// write's PostgreSQL cost is per statement (planning, executor set-up, the commit), not per row
// (docs/benchmark-log.md, "Orders that arrive together share one statement").

import { Fifo } from './fifo.js';

interface Pending<I, O> {
  input: I;
  resolve: (output: O | Promise<O>) => void;
  reject: (error: unknown) => void;
  /** performance.now() when it came. */
  at: number;
  /** True once whoever called has gone (its client hung up): it is not sent. */
  gone: (() => boolean) | undefined;
}

/**
 * Gathers calls into batches for `send`, which answers each input of a batch in its place (a
 * value, or a promise of its own: one input's failure need not fail its neighbours).
 *
 * A batch leaves at the end of the event-loop turn in which its first call came (setImmediate,
 * so every call of that turn joins it), while fewer than `maxInFlight` batches are out; else when
 * one comes back. So a call under light load goes out alone, a turn later; under load, calls
 * gather while the batches in flight run, and a batch takes at most `maxSize` of them, oldest
 * first. With `minSpacingMs`, a batch also leaves no sooner than that after the one before it:
 * for writes that can wait a few ms, fewer and fuller statements.
 *
 * With `immediate`, `alone()` runs a caller's own statement at once, in the same turn, while
 * nothing waits and fewer than `maxInFlight` batches are out: no added latency at low load; calls
 * gather only while batches are out (a read that a statement in flight would have to wait behind
 * anyway). A caller asks `alone()` first and `call()` when it declines.
 *
 * docs/operations.md#overload, queue time and not queue length: with `maxWaitMs`, a call that has
 * waited that long for a batch is not sent, on a timer of its own, whatever holds the batches in
 * flight (a statement waiting on a lock for its statement time-out): it fails with `expired()`'s
 * error, or is answered by `late(input)` when given. At most `maxWaiting` calls wait; one more is
 * refused at once the same way. A call whose `gone()` is true when its batch leaves, or when it
 * expires, is dropped (it fails with `expired()`'s error, which nobody reads).
 */
export class Batcher<I, O> {
  readonly #send: (inputs: I[]) => Promise<(O | Promise<O>)[]>;
  readonly #maxSize: number;
  readonly #maxInFlight: number;
  readonly #minSpacingMs: number;
  readonly #maxWaitMs: number;
  readonly #maxWaiting: number;
  readonly #expired: () => unknown;
  readonly #late: ((input: I) => Promise<O>) | undefined;
  readonly #onRefused: (() => void) | undefined;
  readonly #immediate: boolean;
  #lastSent = Number.NEGATIVE_INFINITY;
  readonly #waiting = new Fifo<Pending<I, O>>();
  #inFlight = 0;
  #scheduled = false;
  #expiry: NodeJS.Timeout | undefined;

  constructor(
    send: (inputs: I[]) => Promise<(O | Promise<O>)[]>,
    options: {
      maxSize: number;
      maxInFlight: number;
      minSpacingMs?: number;
      maxWaitMs?: number;
      maxWaiting?: number;
      immediate?: boolean;
      /** The error of a call that waited longer than maxWaitMs, or found no room, or whose caller has gone. */
      expired?: () => unknown;
      /** What answers a call that waited longer than maxWaitMs or found no room, instead of expired(). */
      late?: (input: I) => Promise<O>;
      /** Called for each call that waited longer than maxWaitMs or found no room (a metric). */
      onRefused?: () => void;
    },
  ) {
    if (!(options.maxSize >= 1 && options.maxInFlight >= 1)) throw new RangeError('a batch needs room for one call');
    this.#send = send;
    this.#maxSize = options.maxSize;
    this.#maxInFlight = options.maxInFlight;
    this.#minSpacingMs = options.minSpacingMs ?? 0;
    this.#maxWaitMs = options.maxWaitMs ?? Number.POSITIVE_INFINITY;
    this.#maxWaiting = options.maxWaiting ?? Number.POSITIVE_INFINITY;
    this.#expired = options.expired ?? (() => new Error('waited too long for a batch'));
    this.#late = options.late;
    this.#onRefused = options.onRefused;
    this.#immediate = options.immediate === true && this.#minSpacingMs === 0;
  }

  /** Calls waiting for a batch (tests, docs). */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** `input`'s answer, from the next batch that takes it (none if `gone()` is true by then). */
  call(input: I, gone?: () => boolean): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      const pending: Pending<I, O> = { input, resolve, reject, at: performance.now(), gone };
      if (this.#waiting.length >= this.#maxWaiting) return this.#refuse(pending);
      this.#waiting.push(pending);
      this.#schedule();
      this.#arm();
    });
  }

  /**
   * With `immediate`, when nothing waits and fewer than `maxInFlight` batches are out: runs
   * `alone()` (the caller's own statement for its one input) at once, counted as a batch out, so
   * that calls that come meanwhile gather; undefined otherwise (then `call()`). Cheaper than a
   * call of one: no pending record, no promise of the batcher's own around the caller's.
   */
  alone<T>(alone: () => Promise<T>): Promise<T> | undefined {
    if (!this.#immediate || this.#waiting.length > 0 || this.#inFlight >= this.#maxInFlight) return undefined;
    this.#inFlight++;
    this.#lastSent = performance.now();
    const sent = alone();
    sent.then(this.#back, this.#back);
    return sent;
  }

  readonly #back = (): void => {
    this.#inFlight--;
    this.#schedule();
  };

  /** A call that waited too long or found no room: answered late, or refused. */
  #refuse(pending: Pending<I, O>): void {
    this.#onRefused?.();
    if (pending.gone?.() === true || this.#late === undefined) pending.reject(this.#expired());
    else pending.resolve(this.#late(pending.input));
  }

  /** The expiry timer, for the oldest waiting call's deadline. */
  #arm(): void {
    if (this.#expiry !== undefined || this.#maxWaitMs === Number.POSITIVE_INFINITY) return;
    const oldest = this.#waiting.peek();
    if (oldest === undefined) return;
    const wait = Math.max(0, oldest.at + this.#maxWaitMs - performance.now());
    this.#expiry = setTimeout(this.#expire, wait).unref();
  }

  readonly #expire = (): void => {
    this.#expiry = undefined;
    const oldest = performance.now() - this.#maxWaitMs;
    for (
      let pending = this.#waiting.peek();
      pending !== undefined && pending.at <= oldest;
      pending = this.#waiting.peek()
    ) {
      this.#waiting.shift();
      this.#refuse(pending);
    }
    this.#arm();
  };

  /** The calls that may still be sent: one that waited too long fails now, and one whose caller left is dropped. */
  #take(): Pending<I, O>[] {
    const batch: Pending<I, O>[] = [];
    const oldest = performance.now() - this.#maxWaitMs;
    while (batch.length < this.#maxSize) {
      const pending = this.#waiting.shift();
      if (pending === undefined) break;
      if (pending.at < oldest) this.#refuse(pending);
      else if (pending.gone?.() === true) pending.reject(this.#expired());
      else batch.push(pending);
    }
    return batch;
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#waiting.length === 0) return;
    this.#scheduled = true;
    const wait = this.#lastSent + this.#minSpacingMs - performance.now();
    if (wait > 0) setTimeout(this.#flush, wait);
    else setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    // A timer may fire up to a few milliseconds early against performance.now() (libuv measures
    // from the loop's cached clock): wait out the rest rather than send a batch too soon.
    if (this.#lastSent + this.#minSpacingMs > performance.now()) return this.#schedule();
    while (this.#waiting.length > 0 && this.#inFlight < this.#maxInFlight) {
      const batch = this.#take();
      if (batch.length > 0) this.#out(batch);
    }
    if (this.#waiting.length === 0) {
      clearTimeout(this.#expiry);
      this.#expiry = undefined;
    }
  };

  #out(batch: Pending<I, O>[]): void {
    this.#inFlight++;
    this.#lastSent = performance.now();
    void this.#run(batch).finally(() => {
      this.#inFlight--;
      this.#schedule();
    });
  }

  async #run(batch: Pending<I, O>[]): Promise<void> {
    try {
      const outputs = await this.#send(batch.map((pending) => pending.input));
      if (outputs.length !== batch.length) throw new Error(`a batch of ${batch.length} got ${outputs.length} answers`);
      batch.forEach((pending, i) => pending.resolve(outputs[i] as O | Promise<O>));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    }
  }
}
