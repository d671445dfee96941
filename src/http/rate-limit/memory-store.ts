// The quotas' counters in the process: each instance counts alone (with N instances, a caller
// gets up to N× the quota). The default without REDIS_URL.
import type { RateLimitStore } from './store.js';

/** In the process: one count per key for the current window; older windows are dropped. */
export class MemoryStore implements RateLimitStore {
  #window = -1;
  #counts = new Map<string, number>();

  hit(key: string, window: number): number {
    if (window !== this.#window) {
      this.#window = window;
      this.#counts = new Map();
    }
    const count = (this.#counts.get(key) ?? 0) + 1;
    this.#counts.set(key, count);
    return count;
  }

  async close(): Promise<void> {}
}
