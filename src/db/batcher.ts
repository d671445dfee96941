// Group commit: calls that arrive while the database is busy share one statement. Most of a
// write's PostgreSQL cost is per statement (planning, executor set-up, the commit), not per row;
// placing orders one at a time, PostgreSQL spent ~470 µs a statement and ~100 µs an order
// (docs/benchmark-log.md, "Orders that arrive together share one statement").

interface Pending<I, O> {
  input: I;
  resolve: (output: O | Promise<O>) => void;
  reject: (error: unknown) => void;
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
 */
export class Batcher<I, O> {
  readonly #send: (inputs: I[]) => Promise<(O | Promise<O>)[]>;
  readonly #maxSize: number;
  readonly #maxInFlight: number;
  readonly #minSpacingMs: number;
  #lastSent = Number.NEGATIVE_INFINITY;
  #waiting: Pending<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(
    send: (inputs: I[]) => Promise<(O | Promise<O>)[]>,
    options: { maxSize: number; maxInFlight: number; minSpacingMs?: number },
  ) {
    if (!(options.maxSize >= 1 && options.maxInFlight >= 1)) throw new RangeError('a batch needs room for one call');
    this.#send = send;
    this.#maxSize = options.maxSize;
    this.#maxInFlight = options.maxInFlight;
    this.#minSpacingMs = options.minSpacingMs ?? 0;
  }

  /** `input`'s answer, from the next batch that takes it. */
  call(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#waiting.push({ input, resolve, reject });
      this.#schedule();
    });
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
      const batch = this.#waiting.splice(0, this.#maxSize);
      this.#inFlight++;
      this.#lastSent = performance.now();
      void this.#run(batch).finally(() => {
        this.#inFlight--;
        this.#schedule();
      });
    }
  };

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
