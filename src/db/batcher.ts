// Group commit: calls that arrive while the database is busy share one statement. Most of a
// write's PostgreSQL cost is per statement (planning, executor set-up, the commit), not per row;
// placing orders one at a time, PostgreSQL spent ~470 µs a statement and ~100 µs an order
// (docs/benchmark-log.md, "Orders that arrive together share one statement").

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
 * With `maxWaitMs`, a call that waited longer than that for a batch is not sent: it fails with
 * `expired()`'s error (docs/operations.md#overload: queue time, not queue length). A call whose
 * `gone()` is true when its batch leaves is not sent either, and fails with `left()`'s error.
 */
export class Batcher<I, O> {
  readonly #send: (inputs: I[]) => Promise<(O | Promise<O>)[]>;
  readonly #maxSize: number;
  readonly #maxInFlight: number;
  readonly #minSpacingMs: number;
  readonly #maxWaitMs: number;
  readonly #expired: () => unknown;
  readonly #immediate: boolean;
  #lastSent = Number.NEGATIVE_INFINITY;
  #waiting: Pending<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(
    send: (inputs: I[]) => Promise<(O | Promise<O>)[]>,
    options: {
      maxSize: number;
      maxInFlight: number;
      minSpacingMs?: number;
      maxWaitMs?: number;
      immediate?: boolean;
      /** The error of a call that waited longer than maxWaitMs, or whose caller has gone. */
      expired?: () => unknown;
    },
  ) {
    if (!(options.maxSize >= 1 && options.maxInFlight >= 1)) throw new RangeError('a batch needs room for one call');
    this.#send = send;
    this.#maxSize = options.maxSize;
    this.#maxInFlight = options.maxInFlight;
    this.#minSpacingMs = options.minSpacingMs ?? 0;
    this.#maxWaitMs = options.maxWaitMs ?? Number.POSITIVE_INFINITY;
    this.#expired = options.expired ?? (() => new Error('waited too long for a batch'));
    this.#immediate = options.immediate === true && this.#minSpacingMs === 0;
  }

  /** `input`'s answer, from the next batch that takes it (none if `gone()` is true by then). */
  call(input: I, gone?: () => boolean): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#waiting.push({ input, resolve, reject, at: performance.now(), gone });
      this.#schedule();
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

  /** The calls that may still be sent: one that waited too long, or whose caller left, fails now. */
  #take(): Pending<I, O>[] {
    const batch: Pending<I, O>[] = [];
    const oldest = performance.now() - this.#maxWaitMs;
    while (batch.length < this.#maxSize && this.#waiting.length > 0) {
      const taken = this.#waiting.splice(0, this.#maxSize - batch.length);
      for (const pending of taken) {
        if (pending.at < oldest || pending.gone?.() === true) pending.reject(this.#expired());
        else batch.push(pending);
      }
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
