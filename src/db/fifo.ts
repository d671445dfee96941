/** A FIFO queue whose push and shift are O(1) however long it is used without draining. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  /** Slots held, consumed ones included (for tests: it stays within twice the length). */
  get capacity(): number {
    return this.#items.length;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  peek(): T | undefined {
    return this.#head === this.#items.length ? undefined : this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    // Compact once the consumed prefix is half the array: amortised O(1), bounded memory.
    if (this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}
