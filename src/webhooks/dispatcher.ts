// The webhook dispatcher (docs/webhooks.md), one per instance unless WEBHOOK_DISPATCHER=false. It
// claims due deliveries (deliveries.repository.ts: SKIP LOCKED and a lease, so instances never
// send one delivery at once and a dead instance's claims come due again), POSTs each event in
// the Standard Webhooks format over a keep-alive undici Agent, and records the outcome: 2xx
// delivered; anything else retried after the next step of WEBHOOK_RETRY_SCHEDULE (±20%), then
// dead; 410 also disables the subscription. Redirects are not followed. Requests never wait for
// it: they only insert rows, and wake it after they commit.
//
// SSRF (docs/webhooks.md): unless WEBHOOK_ALLOW_PRIVATE_NETWORKS, the address actually connected to
// must be public: a host name is resolved by the connection's own lookup, which refuses private
// answers (so a name that resolved to a public address at creation and to 127.0.0.1 now is
// refused, and the log says why); an address literal is checked before connecting.
import { randomUUID } from 'node:crypto';
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import ipaddr from 'ipaddr.js';
import postgres from 'postgres';
import { listsHosts } from '../db/create-database.js';
import { Counter, Gauge } from 'prom-client';
import { Agent } from 'undici';
import { deliveryHandoff, toCloudEvent } from '../events/index.js';
import { onWriteResponse } from '../http/write-hooks.js';
import { isPublicAddress, type ResolveHost } from './address-guard.js';
import { AttemptSlots } from './attempt-slots.js';
import {
  claimDeliveries,
  disableSubscription,
  pendingStats,
  recordDelivered,
  releaseLeased,
  recordOutcome,
  type ClaimedDelivery,
} from './deliveries.repository.js';
import { signatureHeader } from './signing.js';
import { deliverySpan } from '../tracing/delivery-spans.js';

/** The channel an instance notifies after it queued deliveries (LISTENed by every dispatcher). */
const NOTIFY_CHANNEL = 'resource_api_webhooks';
/** NOTIFYs of one instance are at least this far apart (a busy instance's dispatcher needs none). */
const NOTIFY_SPACING_MS = 50;

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
/** Ids of this process's new deliveries waiting to be claimed by primary key, at most. */
const OWN_MAX = 10_000;

/** A receiver URL, parsed once: the Agent's request by origin and path skips a parse per attempt. */
interface Target {
  origin: string;
  path: string;
  /** The host when it is an address literal that is not public (refused unless private networks are allowed). */
  privateLiteral: string | undefined;
}
const targets = new Map<string, Target>();
function targetOf(url: string): Target {
  let target = targets.get(url);
  if (target === undefined) {
    const parsed = new URL(url);
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    target = {
      origin: parsed.origin,
      path: `${parsed.pathname}${parsed.search}`,
      privateLiteral: ipaddr.isValid(host) && !isPublicAddress(host) ? host : undefined,
    };
    if (targets.size >= 1000) targets.clear();
    targets.set(url, target);
  }
  return target;
}

/**
 * How long a claim is held: an attempt's time-out and 5 s more, at most 30 s (WEBHOOK_TIMEOUT_MS
 * is at most 25 s). A killed instance's claims are due again after it.
 */
export const leaseMs = (timeoutMs: number): number => Math.min(30_000, timeoutMs + 5_000);

declare module 'fastify' {
  interface FastifyInstance {
    /** Makes the dispatcher look for due deliveries now (after a write commits). */
    wakeDispatcher: () => void;
  }
}

/** The wait before the attempt after `attempts` failed ones; undefined when the schedule is spent. */
export function retryDelayMs(schedule: readonly number[], attempts: number, random = Math.random): number | undefined {
  const step = schedule[attempts - 1];
  return step === undefined ? undefined : Math.round(step * (0.8 + 0.4 * random()));
}

class RefusedAddress extends Error {
  readonly code = 'EWEBHOOKADDRESS';
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for net/tls.connect that resolves through `resolveHost` and refuses private answers. */
function guardedLookup(resolveHost: ResolveHost, allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolveHost(hostname).then(
      (addresses) => {
        const refused = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a));
        if (refused !== undefined || addresses.length === 0) {
          callback(
            new RefusedAddress(
              // Which private address it was is not told: the delivery log is read through the API.
              refused === undefined
                ? `refused to connect: ${hostname} resolves to no address`
                : `refused to connect: ${hostname} does not resolve to public addresses only`,
            ),
            [],
          );
          return;
        }
        const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        const [first] = all;
        if (options.all === true) callback(null, all);
        else if (first !== undefined) callback(null, first.address, first.family);
      },
      (error: unknown) => {
        callback(error as NodeJS.ErrnoException, []);
      },
    );
  };
}

async function dispatcher(app: FastifyInstance): Promise<void> {
  const { dispatch, timeoutMs, pollMs, retryScheduleMs, allowPrivateNetworks, maxInFlight } = app.config.webhooks;
  let wake: () => void = () => {};
  // A full scan of the due deliveries is asked for by this (another instance's NOTIFY, a
  // redelivery, the poll timer); this process's own new deliveries are claimed by id.
  let scanSoon: () => void = () => {};
  app.decorate('wakeDispatcher', () => {
    scanSoon();
  });

  // docs/webhooks.md metrics. The backlog is the database's, so every instance reports it.
  const outcomes = new Counter({
    name: 'webhook_deliveries_total',
    help: 'Webhook delivery attempts by this instance, by outcome',
    labelNames: ['outcome'] as const,
    registers: [app.metrics],
  });
  let stats: Promise<{ pending: number; oldestSeconds: number }> | undefined;
  const pendingStatsOnce = () => (stats ??= pendingStats(app.db).finally(() => (stats = undefined)));
  new Gauge({
    name: 'webhook_pending',
    help: 'Webhook deliveries not yet delivered or dead (all instances)',
    registers: [app.metrics],
    async collect() {
      this.set((await pendingStatsOnce()).pending);
    },
  });
  new Gauge({
    name: 'webhook_oldest_pending_seconds',
    help: 'Age of the oldest webhook delivery not yet delivered or dead, in seconds (0: none)',
    registers: [app.metrics],
    async collect() {
      this.set((await pendingStatsOnce()).oldestSeconds);
    },
  });
  // PostgreSQL: one connection of its own on DATABASE_DIRECT_URL (never through a transaction
  // pooler, which cannot carry LISTEN), to LISTEN (so that deliveries queued by any instance
  // wake this one at once; polling stays the fallback) and to NOTIFY the others after this
  // instance queued some. The NOTIFY is sent after the write has committed and answered, at
  // most every NOTIFY_SPACING_MS, never inside the write's transaction: a NOTIFY there holds a
  // cluster-wide lock at commit, which serialised every order (measured: −35% POST /api/v1/orders
  // with one subscription). PGlite is one process, which wakes itself after its own writes.
  const database = app.config.database;
  const channel =
    database.kind === 'postgres'
      ? postgres(database.directUrl, {
          max: 1,
          onnotice: () => {},
          // LISTEN on the primary only, found again after a failover (create-database.ts, listsHosts).
          ...(listsHosts(database.directUrl) ? { target_session_attrs: 'primary' as const } : {}),
          connection: { application_name: 'resource-api-listen' },
        })
      : undefined;
  // The payload names the instance, so that a dispatcher ignores its own notifications.
  const instance = randomUUID();
  let lastNotify = -Infinity;
  let notifyTimer: NodeJS.Timeout | undefined;
  const notifyOthers = () => {
    if (channel === undefined || notifyTimer !== undefined) return;
    const send = () => {
      notifyTimer = undefined;
      lastNotify = performance.now();
      channel.notify(NOTIFY_CHANNEL, instance).catch((e: unknown) => {
        app.log.warn({ err: e }, `NOTIFY ${NOTIFY_CHANNEL} failed: other instances find these deliveries by polling`);
      });
    };
    const wait = lastNotify + NOTIFY_SPACING_MS - performance.now();
    if (wait <= 0) send();
    else notifyTimer = setTimeout(send, wait); // the trailing one: the last write is never left out
  };
  // After a write that queued deliveries has answered (and so committed), they are due now:
  // here, and on the other instances. A write that queued none costs a comparison; a read, nothing.
  const handoff = deliveryHandoff(app.db);
  let seen = handoff.count;
  onWriteResponse(app, (_request, _reply, done) => {
    const now = handoff.count;
    if (now !== seen) {
      seen = now;
      wake();
      notifyOthers();
    }
    done();
  });
  app.addHook('onClose', async () => {
    if (notifyTimer !== undefined) clearTimeout(notifyTimer);
    await channel?.end({ timeout: 1 });
  });
  if (!dispatch) return;

  const agent = new Agent({
    connect: { timeout: timeoutMs, lookup: guardedLookup(app.resolveHost, allowPrivateNetworks) },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 30_000,
  });
  const source = `${app.config.baseUrl}/api/v1`;

  // Delivered outcomes are written together: those that finish while one such UPDATE runs go
  // into the next (group commit), so a busy dispatcher writes far fewer statements than deliveries.
  let toRecord: {
    id: number;
    fencing_token: number;
    responseStatus: number;
    resolve: () => void;
    reject: (e: unknown) => void;
  }[] = [];
  let recording = false;
  let lastRecord = -Infinity;
  async function flushDelivered(): Promise<void> {
    recording = true;
    while (toRecord.length > 0) {
      const spacing = lastRecord + RECORD_SPACING_MS - performance.now();
      if (spacing > 0) await new Promise((resolve) => setTimeout(resolve, spacing));
      lastRecord = performance.now();
      const batch = toRecord;
      toRecord = [];
      try {
        // Asked for again while their attempts were open: due now (migration 0020).
        if ((await recordDelivered(app.db, batch)) > 0) scanSoon();
        for (const b of batch) b.resolve();
      } catch (e) {
        for (const b of batch) b.reject(e);
      }
    }
    recording = false;
  }
  const markDelivered = ({ id, fencing_token }: ClaimedDelivery, responseStatus: number) =>
    new Promise<void>((resolve, reject) => {
      toRecord.push({ id, fencing_token, responseStatus, resolve, reject });
      if (!recording) void flushDelivered();
    });

  // Secrets are stored encrypted (crypto/encryption.ts); each stored value is decrypted once.
  const decrypted = new Map<string, string>();
  function plainSecret(stored: string): string {
    let plain = decrypted.get(stored);
    if (plain === undefined) {
      plain = app.encryption.decrypt(stored, 'webhook-secret');
      if (decrypted.size >= 1000) decrypted.clear();
      decrypted.set(stored, plain);
    }
    return plain;
  }

  /**
   * Sends one delivery and records its outcome. `answered` is called once the exchange with the
   * receiver is over (before the outcome is recorded): the subscription's slot is free from then.
   */
  async function attempt(d: ClaimedDelivery, answered: () => void): Promise<void> {
    const body = toCloudEvent(
      { id: d.event_id, type: d.event_type, subject: d.subject, time: d.time, data: d.data },
      source,
    );
    const timestamp = Math.floor(Date.now() / 1000);
    let responseStatus: number | null = null;
    let error: string | null = null;
    let timer: NodeJS.Timeout | undefined;
    // A CLIENT span in the trace of the request that wrote the event, its traceparent sent on.
    const span = deliverySpan(d);
    try {
      const secrets =
        d.previous_secret !== null &&
        d.previous_secret_expires_at !== null &&
        d.previous_secret_expires_at.getTime() > Date.now()
          ? [plainSecret(d.secret), plainSecret(d.previous_secret)]
          : [plainSecret(d.secret)];
      const target = targetOf(d.url);
      if (!allowPrivateNetworks && target.privateLiteral !== undefined) {
        throw new RefusedAddress(`refused to connect: ${target.privateLiteral} is not a public address`);
      }
      // The attempt's whole time, connection to last byte (undici's own time-outs bound each
      // phase, not the whole). A controller and a plain timer: AbortSignal.timeout was among the
      // larger costs of a delivery in the server's profile.
      const controller = new AbortController();
      timer = setTimeout(() => {
        controller.abort(new Error(`timeout: no complete answer within ${String(timeoutMs)} ms`));
      }, timeoutMs);
      const response = await agent.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/cloudevents+json',
          'user-agent': 'resource-api-webhooks',
          'webhook-id': d.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, d.event_id, timestamp, body),
          ...span?.headers,
        },
        signal: controller.signal,
      });
      responseStatus = response.statusCode;
      await response.body.dump();
    } catch (e) {
      error = e instanceof Error ? e.message.slice(0, 500) : 'delivery failed';
    } finally {
      clearTimeout(timer);
      answered();
      span?.end(responseStatus, error);
    }
    if (responseStatus !== null && responseStatus >= 200 && responseStatus < 300) {
      await markDelivered(d, responseStatus);
      outcomes.inc({ outcome: 'delivered' });
      return;
    }
    if (responseStatus === 410) await disableSubscription(app.db, d.subscription_id);
    error ??= `the receiver answered ${String(responseStatus)}`;
    const delay = retryDelayMs(retryScheduleMs, d.attempts);
    outcomes.inc({ outcome: delay === undefined ? 'dead' : 'failed' });
    const again = await recordOutcome(
      app.db,
      d,
      delay === undefined
        ? { status: 'dead', responseStatus, error }
        : { status: 'failed', responseStatus, error, nextAttemptAt: new Date(Date.now() + delay) },
    );
    if (again) scanSoon(); // asked for again while this attempt was open: due now
  }

  const state = { stopped: false, woken: false, scan: true };
  // Read through functions: the awaits in between are where they change.
  const stopped = () => state.stopped;
  const woken = () => state.woken;
  let sleeping: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  wake = () => {
    state.woken = true;
    if (sleeping !== undefined) {
      clearTimeout(sleeping.timer);
      sleeping.resolve();
    }
  };
  scanSoon = () => {
    state.scan = true;
    wake();
  };
  const nap = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        state.scan = true; // the poll: retries that came due, other instances' deliveries
        resolve();
      }, pollMs);
      sleeping = { timer, resolve };
    }).finally(() => (sleeping = undefined));

  /**
   * Leased deliveries wait in hand, by subscription, until their subscription has a slot: at most
   * WEBHOOK_MAX_IN_FLIGHT attempts open for one, so that receivers that hang hold only their own
   * subscriptions' slots. One that waited in hand for half its lease is given back, due at once for
   * any instance's claim: sent later, its attempt could cross another's once the lease lapsed.
   */
  const lease = leaseMs(timeoutMs);
  const slots = new AttemptSlots<ClaimedDelivery>(maxInFlight, PROCESS_MAX);

  /** Gives back what waited in hand too long (and everything, with `all`, at shutdown). */
  async function giveBack(all = false): Promise<void> {
    const back = all ? slots.drain() : slots.expired(performance.now() - lease / 2);
    if (back.length === 0) return;
    state.scan = true;
    // Not fatal: unreleased, they are due again once their lease lapses.
    await releaseLeased(app.db, back).catch((e: unknown) => {
      app.log.warn({ err: e }, 'giving back webhook deliveries failed: they are due again after their lease');
    });
  }

  /**
   * This process's new deliveries, once their writes have committed: those leased to it at
   * insert are taken in hand as they are; the others are claimed by primary key. One that is not
   * claimed (an earlier event of its subject still undelivered, its subscription busy or paused
   * meanwhile) is tried again at the next turns, then left to the scan. The ids waiting are
   * bounded like the hand-off's: beyond, the oldest are left to the scan.
   */
  const own: { id: number; misses: number }[] = [];
  async function claimOwn(room: number, busy: number[]): Promise<ClaimedDelivery[]> {
    const now = performance.now();
    for (const { delivery, at } of handoff.leased.splice(0)) slots.hold(delivery, at);
    for (const id of handoff.ids) own.push({ id, misses: 0 });
    handoff.ids = [];
    if (own.length > OWN_MAX) {
      own.splice(0, own.length - OWN_MAX);
      state.scan = true;
    }
    if (own.length === 0 || room === 0) return [];
    const batch = own.splice(0, room);
    const claimed = await claimDeliveries(
      app.db,
      batch.length,
      lease,
      batch.map((o) => o.id),
      busy,
    );
    const got = new Set(claimed.map((d) => d.id));
    for (const o of batch) {
      if (got.has(o.id)) continue;
      if (o.misses < 3) own.push({ id: o.id, misses: o.misses + 1 });
      else state.scan = true;
    }
    for (const d of claimed) slots.hold(d, now);
    return claimed;
  }

  function send(d: ClaimedDelivery): void {
    // The slot is the receiver's: freed when its exchange ends, not after the outcome is written
    // (recording waits for a group commit; a slot held through it capped one subscription at
    // about 8 deliveries per 10 ms).
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      slots.done(d.subscription_id);
      // What waits in hand starts at once (the loop's turns are at least CLAIM_SPACING_MS apart,
      // which would cap a subscription at WEBHOOK_MAX_IN_FLIGHT per turn); the loop claims more.
      if (!stopped()) for (const next of slots.start()) send(next);
      wake();
    };
    const sending: Promise<void> = attempt(d, free)
      .catch((e: unknown) => {
        app.log.warn({ err: e, deliveryId: d.id }, 'recording a webhook delivery failed');
      })
      .finally(() => {
        free();
        inFlight.delete(sending);
        // A slot is free, and the next event of this subject may be due: after a retry, that
        // one may have been left to the scan.
        if (d.attempts > 1) state.scan = true;
        wake();
      });
    inFlight.add(sending);
  }

  // The loop never waits for an attempt: a slow receiver holds only its own subscription's slots
  // (and, by the order rule, its subject), never the other deliveries.
  const inFlight = new Set<Promise<void>>();
  let lastClaim = -Infinity;
  async function loop(): Promise<void> {
    while (!stopped()) {
      const spacing = lastClaim + CLAIM_SPACING_MS - performance.now();
      if (spacing > 0) await new Promise((resolve) => setTimeout(resolve, spacing));
      state.woken = false;
      let claimed = 0;
      let room = 0;
      try {
        await giveBack();
        room = Math.min(CLAIM_MAX, slots.room());
        if (room > 0) {
          lastClaim = performance.now();
          const busy = slots.busy();
          claimed = (await claimOwn(room, busy)).length;
          if (state.scan && claimed < room) {
            const wanted = room - claimed;
            const scanned = await claimDeliveries(app.db, wanted, lease, undefined, busy);
            // A full batch: more may be due, so scan again when a slot frees.
            state.scan = scanned.length === wanted;
            const now = performance.now();
            for (const d of scanned) slots.hold(d, now);
            claimed += scanned.length;
          }
        }
      } catch (e) {
        if (!stopped()) app.log.warn({ err: e }, 'claiming webhook deliveries failed');
      }
      for (const d of slots.start()) send(d);
      handoff.held = slots.held;
      if (stopped()) break;
      if ((room === 0 || claimed < room) && !woken()) await nap();
    }
    await Promise.all(inFlight);
  }

  let running: Promise<void> | undefined;
  app.addHook('onReady', async () => {
    handoff.leaseMs = lease; // new deliveries are inserted leased to this process (events/index.ts)
    running = loop();
    if (channel !== undefined) {
      await channel
        .listen(NOTIFY_CHANNEL, (from) => {
          if (from !== instance) scanSoon();
        })
        .catch((e: unknown) => {
          app.log.warn({ err: e }, `LISTEN ${NOTIFY_CHANNEL} failed: webhook deliveries are found by polling`);
        });
    }
  });
  app.addHook('preClose', (done) => {
    handoff.leaseMs = undefined;
    state.stopped = true;
    wake();
    done();
  });
  app.addHook('onClose', async () => {
    await running;
    // Leased but not sent (in hand, or written while the loop stopped): due again at once for
    // the other instances, or for this one's restart, instead of after the lease.
    for (const { delivery, at } of handoff.leased.splice(0)) slots.hold(delivery, at);
    await giveBack(true);
    handoff.held = 0;
    await agent.close();
  });
}

export default fp(dispatcher, { name: 'webhook-dispatcher' });
