// How long the requests in flight have taken so far, for readiness (docs/operations.md#overload):
// a request counts from the moment it is complete (its body received) to its answer, the
// instance's own time; a client that sends its body slowly spends its own, and cannot make the
// instance "not ready".

const SLICE_MS = 100;
const SLICES = 64;

/**
 * The requests in flight, counted by the 100-ms slice in which each became complete: a few array
 * writes a request, and the age of the oldest by a scan of 64 slices. A request older than the
 * 6.4 s the slices span is counted apart, as older than all of them.
 */
export class RequestAges {
  readonly #counts = new Int32Array(SLICES);
  readonly #slices = new Float64Array(SLICES).fill(-1);
  #older = 0;

  /** Counts a request complete at `now`; gives the slice to remove it from. */
  add(now: number): number {
    const slice = Math.floor(now / SLICE_MS);
    const i = slice % SLICES;
    if (this.#slices[i] !== slice) {
      this.#older += this.#counts[i] as number;
      this.#counts[i] = 0;
      this.#slices[i] = slice;
    }
    (this.#counts[i] as number)++;
    return slice;
  }

  remove(slice: number): void {
    const i = slice % SLICES;
    if (this.#slices[i] === slice) (this.#counts[i] as number)--;
    else this.#older--;
  }

  /** How long the oldest request in flight has been (ms; 0 when none). */
  oldestMs(now: number): number {
    if (this.#older > 0) return SLICE_MS * SLICES;
    let oldest = Number.POSITIVE_INFINITY;
    for (let i = 0; i < SLICES; i++) {
      const slice = this.#slices[i] as number;
      if ((this.#counts[i] as number) > 0 && slice < oldest) oldest = slice;
    }
    return oldest === Number.POSITIVE_INFINITY ? 0 : Math.max(0, now - oldest * SLICE_MS);
  }
}
