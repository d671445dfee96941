// The dispatcher's attempt slots (docs/webhooks.md, "Isolation"): at most `perSubscription`
// attempts open for one subscription, so that a receiver that hangs holds its own slots and never
// another subscription's, and at most `total` for the process (sockets and memory stay bounded).
// Deliveries leased to the process (at their insert, or by a claim) wait here, by subscription,
// until their subscription has a slot free.

interface Held<D> {
  delivery: D;
  /** performance.now() when it came in hand: one that waits too long is given back. */
  at: number;
}

export class AttemptSlots<D extends { subscription_id: number }> {
  private readonly waiting = new Map<number, Held<D>[]>();
  private readonly open = new Map<number, number>();
  /** Deliveries in hand, not yet started. */
  held = 0;
  /** Attempts open. */
  opened = 0;

  constructor(
    private readonly perSubscription: number,
    private readonly total: number,
  ) {}

  /** Takes a leased delivery in hand, behind the others of its subscription. */
  hold(delivery: D, at: number): void {
    const queue = this.waiting.get(delivery.subscription_id);
    if (queue === undefined) this.waiting.set(delivery.subscription_id, [{ delivery, at }]);
    else queue.push({ delivery, at });
    this.held++;
  }

  /** The deliveries in hand whose subscription has a slot free, oldest first; each is counted open. */
  start(): D[] {
    const started: D[] = [];
    for (const [subscription, queue] of this.waiting) {
      let open = this.open.get(subscription) ?? 0;
      while (queue.length > 0 && open < this.perSubscription && this.opened < this.total) {
        started.push((queue.shift() as Held<D>).delivery);
        open++;
        this.opened++;
        this.held--;
      }
      this.open.set(subscription, open);
      if (queue.length === 0) this.waiting.delete(subscription);
      if (this.opened >= this.total) break;
    }
    return started;
  }

  /** An attempt of the subscription ended. */
  done(subscription: number): void {
    const open = (this.open.get(subscription) ?? 1) - 1;
    if (open === 0) this.open.delete(subscription);
    else this.open.set(subscription, open);
    this.opened--;
  }

  /** Takes out and returns what came in hand before `before` (queues are oldest first). */
  expired(before: number): D[] {
    const gone: D[] = [];
    for (const [subscription, queue] of this.waiting) {
      while (queue.length > 0 && (queue[0] as Held<D>).at < before) gone.push((queue.shift() as Held<D>).delivery);
      if (queue.length === 0) this.waiting.delete(subscription);
    }
    this.held -= gone.length;
    return gone;
  }

  /** Takes out and returns everything in hand (at shutdown). */
  drain(): D[] {
    const all = [...this.waiting.values()].flatMap((queue) => queue.map((h) => h.delivery));
    this.waiting.clear();
    this.held = 0;
    return all;
  }

  /** The subscriptions with no room for more: as many attempts open and in hand as they may have. */
  busy(): number[] {
    const full: number[] = [];
    for (const [subscription, open] of this.open) {
      if (open + (this.waiting.get(subscription)?.length ?? 0) >= this.perSubscription) full.push(subscription);
    }
    for (const [subscription, queue] of this.waiting) {
      if (!this.open.has(subscription) && queue.length >= this.perSubscription) full.push(subscription);
    }
    return full;
  }

  /** How many more the process may take in hand now. */
  room(): number {
    return Math.max(0, this.total - this.opened - this.held);
  }
}
