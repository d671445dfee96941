// The claim engine (docs/webhooks.md): one per instance unless WEBHOOK_DISPATCHER=false. It takes
// due deliveries in hand (this process's own new ones by id or as leased at insert, then a scan:
// deliveries.repository.ts claims with SKIP LOCKED and a lease, so instances never send one
// delivery at once and a dead instance's claims come due again), starts each once its
// subscription has a slot (attempt-slots.ts), and records what the sender's exchange means
// (sender.ts, outcomeOf): delivered outcomes together, through a group commit (db/batcher.ts).
// The loop never waits for an attempt: a slow receiver holds only its own subscription's slots
// (and, by the order rule, its subject), never the other deliveries.
import { Batcher } from '../../db/batcher.js';
import type { Db } from '../../db/database.js';
import {
  claimDeliveries,
  disableSubscription,
  recordDelivered,
  recordOutcome,
  releaseLeased,
  type ClaimedDelivery,
} from '../deliveries.repository.js';
import { AttemptSlots } from './attempt-slots.js';
import type { DeliveryHandoff } from '../../events/index.js';
import { leaseMs, outcomeOf, type Sender } from './sender.js';

/** Rows one claim takes at most. */
const CLAIM_MAX = 32;
/**
 * Attempts open and deliveries in hand at most in one process, whatever the subscriptions
 * (sockets and memory stay bounded); each subscription has WEBHOOK_MAX_IN_FLIGHT of them.
 */
const PROCESS_MAX = 1024;
/**
 * Claims are at least this far apart: wake-ups that arrive meanwhile (each answered write, each
 * finished attempt) are served by one claim of several rows instead of a claim each. An idle
 * dispatcher claims at once, so a lone event waits for none of it.
 */
const CLAIM_SPACING_MS = 10;
/**
 * Delivered outcomes are written at most this often: those that finish meanwhile go into one
 * statement (a lease is seconds long, so a few ms more before it is released changes nothing).
 */
const RECORD_SPACING_MS = 10;
/** Delivered outcomes one statement records at most. */
const RECORD_MAX = 512;
/** Ids of this process's new deliveries waiting to be claimed by primary key, at most. */
const OWN_MAX = 10_000;

export interface DispatcherOptions {
  db: Db;
  sender: Sender;
  handoff: DeliveryHandoff;
  timeoutMs: number;
  pollMs: number;
  retryScheduleMs: readonly number[];
  maxInFlight: number;
  /** Each attempt's outcome, for the metrics. */
  onOutcome: (outcome: 'delivered' | 'failed' | 'dead') => void;
  log: { warn(fields: object, message: string): void };
}

type Delivered = { id: number; fencing_token: number; responseStatus: number };

export class Dispatcher {
  readonly #o: DispatcherOptions;
  readonly #lease: number;
  readonly #slots: AttemptSlots<ClaimedDelivery>;
  readonly #delivered: Batcher<Delivered, undefined>;
  /** This process's new deliveries to claim by id, and how often a claim missed each. */
  readonly #own: { id: number; misses: number }[] = [];
  readonly #inFlight = new Set<Promise<void>>();
  #stopped = false;
  #woken = false;
  /** A full scan of the due deliveries is wanted (another instance's NOTIFY, a redelivery, the poll). */
  #scan = true;
  #sleeping: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  #lastClaim = Number.NEGATIVE_INFINITY;
  #running: Promise<void> | undefined;

  constructor(options: DispatcherOptions) {
    this.#o = options;
    this.#lease = leaseMs(options.timeoutMs);
    this.#slots = new AttemptSlots<ClaimedDelivery>(options.maxInFlight, PROCESS_MAX);
    // Delivered outcomes are written together: those that finish while one such UPDATE runs go
    // into the next, so a busy dispatcher writes far fewer statements than deliveries.
    this.#delivered = new Batcher(
      async (batch: Delivered[]) => {
        // Asked for again while their attempts were open: due now.
        if ((await recordDelivered(options.db, batch)) > 0) this.scanSoon();
        return batch.map(() => undefined);
      },
      { maxSize: RECORD_MAX, maxInFlight: 1, minSpacingMs: RECORD_SPACING_MS },
    );
  }

  /** Looks for this process's new deliveries now (a write that queued some has committed). */
  wake(): void {
    this.#woken = true;
    if (this.#sleeping !== undefined) {
      clearTimeout(this.#sleeping.timer);
      this.#sleeping.resolve();
    }
  }

  /** Scans for every due delivery now: another instance's, a redelivery, a retry. */
  scanSoon(): void {
    this.#scan = true;
    this.wake();
  }

  /** Starts the loop; from now on new deliveries are inserted leased to this process. */
  start(): void {
    this.#o.handoff.leaseMs = this.#lease;
    this.#running = this.#loop();
  }

  /** Stops claiming: no new delivery is leased to this process from now on. */
  stop(): void {
    this.#o.handoff.leaseMs = undefined;
    this.#stopped = true;
    this.wake();
  }

  /**
   * Waits for the open attempts, then gives back what is leased and not sent (in hand, or
   * written while the loop stopped): due again at once for the other instances, or for this
   * one's restart, instead of after the lease.
   */
  async close(): Promise<void> {
    if (!this.#stopped) this.stop();
    await this.#running;
    const { handoff } = this.#o;
    for (const { delivery, at } of handoff.leased.splice(0)) this.#slots.hold(delivery, at);
    await this.#giveBack(true);
    handoff.held = 0;
    await this.#o.sender.close();
  }

  async #loop(): Promise<void> {
    const { handoff, db, log } = this.#o;
    while (!this.#stopped) {
      const spacing = this.#lastClaim + CLAIM_SPACING_MS - performance.now();
      if (spacing > 0) await new Promise((resolve) => setTimeout(resolve, spacing));
      this.#woken = false;
      let claimed = 0;
      let room = 0;
      try {
        await this.#giveBack();
        // What this process's writes leased to it comes in hand first, so that the room
        // counts it (they are leased already: leaving them out would exceed the cap).
        for (const { delivery, at } of handoff.leased.splice(0)) this.#slots.hold(delivery, at);
        room = Math.min(CLAIM_MAX, this.#slots.room());
        if (room > 0) {
          this.#lastClaim = performance.now();
          const busy = this.#slots.busy();
          claimed = (await this.#claimOwn(room, busy)).length;
          if (this.#scan && claimed < room) {
            const wanted = room - claimed;
            const scanned = await claimDeliveries(db, wanted, this.#lease, undefined, busy);
            // A full batch: more may be due, so scan again when a slot frees.
            this.#scan = scanned.length === wanted;
            const now = performance.now();
            for (const d of scanned) this.#slots.hold(d, now);
            claimed += scanned.length;
          }
        }
      } catch (e) {
        if (!this.#isStopped()) log.warn({ err: e }, 'claiming webhook deliveries failed');
      }
      for (const d of this.#slots.start()) this.#send(d);
      handoff.held = this.#slots.held;
      if (this.#isStopped()) break;
      if ((room === 0 || claimed < room) && !this.#isWoken()) await this.#nap();
    }
    await Promise.all(this.#inFlight);
  }

  // Read through methods: the loop's awaits are where they change, which narrowing cannot see.
  #isStopped(): boolean {
    return this.#stopped;
  }

  #isWoken(): boolean {
    return this.#woken;
  }

  #nap(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#scan = true; // the poll: retries that came due, other instances' deliveries
        resolve();
      }, this.#o.pollMs);
      this.#sleeping = { timer, resolve };
    }).finally(() => (this.#sleeping = undefined));
  }

  /**
   * Leased deliveries wait in hand, by subscription, until their subscription has a slot: at most
   * WEBHOOK_MAX_IN_FLIGHT attempts open for one, so that receivers that hang hold only their own
   * subscriptions' slots. One that waited in hand for half its lease is given back, due at once
   * for any instance's claim: sent later, its attempt could cross another's once the lease lapsed.
   * With `all` (at shutdown), everything in hand is given back.
   */
  async #giveBack(all = false): Promise<void> {
    const back = all ? this.#slots.drain() : this.#slots.expired(performance.now() - this.#lease / 2);
    if (back.length === 0) return;
    this.#scan = true;
    // Not fatal: unreleased, they are due again once their lease lapses.
    await releaseLeased(this.#o.db, back).catch((e: unknown) => {
      this.#o.log.warn({ err: e }, 'giving back webhook deliveries failed: they are due again after their lease');
    });
  }

  /**
   * This process's new deliveries that were not leased at insert, once their writes have
   * committed, claimed by primary key. One that is not claimed (an earlier event of its subject
   * still undelivered, its subscription busy or paused meanwhile) is tried again at the next
   * turns, then left to the scan. The ids waiting are bounded like the hand-off's: beyond, the
   * oldest are left to the scan.
   */
  async #claimOwn(room: number, busy: number[]): Promise<ClaimedDelivery[]> {
    const { handoff, db } = this.#o;
    const own = this.#own;
    const now = performance.now();
    for (const id of handoff.ids) own.push({ id, misses: 0 });
    handoff.ids = [];
    if (own.length > OWN_MAX) {
      own.splice(0, own.length - OWN_MAX);
      this.#scan = true;
    }
    if (own.length === 0 || room === 0) return [];
    const batch = own.splice(0, room);
    const claimed = await claimDeliveries(
      db,
      batch.length,
      this.#lease,
      batch.map((o) => o.id),
      busy,
    );
    const got = new Set(claimed.map((d) => d.id));
    for (const o of batch) {
      if (got.has(o.id)) continue;
      if (o.misses < 3) own.push({ id: o.id, misses: o.misses + 1 });
      else this.#scan = true;
    }
    for (const d of claimed) this.#slots.hold(d, now);
    return claimed;
  }

  #send(d: ClaimedDelivery): void {
    // The slot is the receiver's: freed when its exchange ends, not after the outcome is written
    // (recording waits for a group commit; a slot held through it capped one subscription at
    // about 8 deliveries per 10 ms).
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      this.#slots.done(d.subscription_id);
      // What waits in hand starts at once (the loop's turns are at least CLAIM_SPACING_MS apart,
      // which would cap a subscription at WEBHOOK_MAX_IN_FLIGHT per turn); the loop claims more.
      if (!this.#stopped) for (const next of this.#slots.start()) this.#send(next);
      this.wake();
    };
    const sending: Promise<void> = this.#attempt(d, free)
      .catch((e: unknown) => {
        this.#o.log.warn({ err: e, deliveryId: d.id }, 'recording a webhook delivery failed');
      })
      .finally(() => {
        free();
        this.#inFlight.delete(sending);
        // A slot is free, and the next event of this subject may be due: after a retry, that
        // one may have been left to the scan.
        if (d.attempts > 1) this.#scan = true;
        this.wake();
      });
    this.#inFlight.add(sending);
  }

  /** Sends one delivery and records its outcome under its lease. */
  async #attempt(d: ClaimedDelivery, answered: () => void): Promise<void> {
    const { db, sender, retryScheduleMs, onOutcome } = this.#o;
    const outcome = outcomeOf(await sender.exchange(d, answered), d.attempts, retryScheduleMs);
    if (outcome.status === 'delivered') {
      await this.#delivered.call({ id: d.id, fencing_token: d.fencing_token, responseStatus: outcome.responseStatus });
      onOutcome('delivered');
      return;
    }
    if (outcome.disable) await disableSubscription(db, d.subscription_id);
    onOutcome(outcome.status);
    const again = await recordOutcome(
      db,
      d,
      outcome.status === 'dead'
        ? { status: 'dead', responseStatus: outcome.responseStatus, error: outcome.error }
        : {
            status: 'failed',
            responseStatus: outcome.responseStatus,
            error: outcome.error,
            nextAttemptAt: new Date(Date.now() + outcome.retryInMs),
          },
    );
    if (again) this.scanSoon(); // asked for again while this attempt was open: due now
  }
}
