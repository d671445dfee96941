// What waits for a connection of the pool, in the order it came (docs/operations.md#overload:
// queue time, not queue length). A waiter is handed a connection by the pool (drain) or refused:
// after `timeoutMs` of waiting, or at once when no connection can be made.
import { Fifo } from './fifo.js';
import type { Need } from './pool-choice.js';

export interface Waiter<C> {
  readonly need: Need;
  /** When it began to wait (performance.now()). */
  readonly at: number;
  /** Takes `connection` (the statement is sent there, or the transaction holds it). */
  take(connection: C): void;
  reject(error: unknown): void;
}

export class WaitQueue<C> {
  readonly #items = new Fifo<Waiter<C>>();
  readonly #timeoutMs: number;
  /** What a waiter that waited too long is refused with. */
  readonly #expired: () => unknown;
  /** Called for each waiter refused for its wait (the queue time-out metric). */
  readonly #onExpired: (error: unknown) => void;
  #sweeper: NodeJS.Timeout | undefined;

  constructor(timeoutMs: number, expired: () => unknown, onExpired: (error: unknown) => void = () => {}) {
    this.#timeoutMs = timeoutMs;
    this.#expired = expired;
    this.#onExpired = onExpired;
  }

  get length(): number {
    return this.#items.length;
  }

  push(waiter: Waiter<C>): void {
    this.#items.push(waiter);
    if (this.#sweeper === undefined) {
      // A few sweeps per time-out: a waiter is refused at most a quarter of it late.
      const every = Math.max(10, Math.min(100, this.#timeoutMs / 4));
      this.#sweeper = setInterval(() => this.#sweep(), every).unref();
    }
  }

  /**
   * Hands waiters, oldest first, to the connection `choose` finds for each, until one must wait
   * on (none for it): the order is kept, so a write waiting for an idle connection holds the
   * statements behind it rather than be overtaken forever.
   */
  drain(choose: (need: Need) => C | undefined): void {
    for (let waiter = this.#items.peek(); waiter !== undefined; waiter = this.#items.peek()) {
      const connection = choose(waiter.need);
      if (connection === undefined) return;
      this.#items.shift();
      waiter.take(connection);
    }
  }

  /** Refuses, with `error`, what began to wait before `since` (everything when omitted). */
  refuse(error: unknown, since = Number.POSITIVE_INFINITY): void {
    for (let waiter = this.#items.peek(); waiter !== undefined && waiter.at < since; waiter = this.#items.peek()) {
      this.#items.shift();
      waiter.reject(error);
    }
    if (this.#items.length === 0) this.#stop();
  }

  end(error: unknown): void {
    this.refuse(error);
    this.#stop();
  }

  /** Refuses what has waited longer than the time-out (the oldest are first). */
  #sweep(): void {
    const oldest = performance.now() - this.#timeoutMs;
    for (let waiter = this.#items.peek(); waiter !== undefined && waiter.at <= oldest; waiter = this.#items.peek()) {
      this.#items.shift();
      const error = this.#expired();
      this.#onExpired(error);
      waiter.reject(error);
    }
    if (this.#items.length === 0) this.#stop();
  }

  #stop(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }
}
