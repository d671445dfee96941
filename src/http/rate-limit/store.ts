// Where the quotas' counters live: the interface every store implements.

/** A counter store: adds one hit to `key` in the window and returns the count so far. */
export interface RateLimitStore {
  hit(key: string, window: number): number | Promise<number>;
  close(): Promise<void>;
}

/** A quota's window: one minute of the wall clock, the same on every instance. */
export const WINDOW_MS = 60_000;
