// The webhook dispatcher (DESIGN §12), one per instance unless WEBHOOK_DISPATCHER=false. It
// claims due deliveries (deliveries.repository.ts: SKIP LOCKED and a lease, so instances never
// send one delivery at once and a dead instance's claims come due again), POSTs each event in
// the Standard Webhooks format over a keep-alive undici Agent, and records the outcome: 2xx
// delivered; anything else retried after the next step of WEBHOOK_RETRY_SCHEDULE (±20%), then
// dead; 410 also disables the subscription. Redirects are not followed. Requests never wait for
// it: they only insert rows, and wake it after they commit.
//
// SSRF (DESIGN §12): unless WEBHOOK_ALLOW_PRIVATE_NETWORKS, the address actually connected to
// must be public: a host name is resolved by the connection's own lookup, which refuses private
// answers (so a name that resolved to a public address at creation and to 127.0.0.1 now is
// refused, and the log says why); an address literal is checked before connecting.
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import ipaddr from 'ipaddr.js';
import postgres from 'postgres';
import { Counter, Gauge } from 'prom-client';
import { Agent, request } from 'undici';
import { deliveriesQueued, toCloudEvent } from '../events/index.js';
import { isPublicAddress, type ResolveHost } from './address-guard.js';
import {
  claimDeliveries,
  disableSubscription,
  pendingStats,
  recordOutcome,
  type ClaimedDelivery,
} from './deliveries.repository.js';
import { signatureHeader } from './signing.js';

/** The channel migration 0011's trigger notifies when deliveries are inserted. */
const NOTIFY_CHANNEL = 'resource_api_webhooks';

/** Attempts in flight at most; while there is room, due deliveries are claimed without waiting. */
const BATCH = 32;
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
              `refused to connect: ${hostname} resolves to ${refused ?? 'no address'}, which is not a public address`,
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
  const { dispatch, timeoutMs, pollMs, retryScheduleMs, allowPrivateNetworks } = app.config.webhooks;
  let wake: () => void = () => {};
  app.decorate('wakeDispatcher', () => {
    wake();
  });

  // DESIGN §12 metrics. The backlog is the database's, so every instance reports it.
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
  if (!dispatch) return;

  const agent = new Agent({
    connect: { timeout: timeoutMs, lookup: guardedLookup(app.resolveHost, allowPrivateNetworks) },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 30_000,
  });
  const source = `${app.config.baseUrl}/api/v1`;

  async function attempt(d: ClaimedDelivery): Promise<void> {
    const body = toCloudEvent(
      { id: d.event_id, type: d.event_type, subject: d.subject, time: d.time, data: d.data },
      source,
    );
    const timestamp = Math.floor(Date.now() / 1000);
    const secrets =
      d.previous_secret !== null &&
      d.previous_secret_expires_at !== null &&
      d.previous_secret_expires_at.getTime() > Date.now()
        ? [d.secret, d.previous_secret]
        : [d.secret];
    let responseStatus: number | null = null;
    let error: string | null = null;
    try {
      const host = new URL(d.url).hostname.replace(/^\[(.*)\]$/, '$1');
      if (!allowPrivateNetworks && ipaddr.isValid(host) && !isPublicAddress(host)) {
        throw new RefusedAddress(`refused to connect: ${host} is not a public address`);
      }
      const response = await request(d.url, {
        method: 'POST',
        dispatcher: agent,
        body,
        headers: {
          'content-type': 'application/cloudevents+json',
          'user-agent': 'resource-api-webhooks',
          'webhook-id': d.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, d.event_id, timestamp, body),
        },
        signal: AbortSignal.timeout(timeoutMs),
      });
      responseStatus = response.statusCode;
      await response.body.dump();
    } catch (e) {
      error = e instanceof Error ? e.message.slice(0, 500) : 'delivery failed';
    }
    const delivered = responseStatus !== null && responseStatus >= 200 && responseStatus < 300;
    if (delivered) {
      await recordOutcome(app.db, d.id, { status: 'delivered', responseStatus, error: null });
      outcomes.inc({ outcome: 'delivered' });
      return;
    }
    if (responseStatus === 410) await disableSubscription(app.db, d.subscription_id);
    error ??= `the receiver answered ${String(responseStatus)}`;
    const delay = retryDelayMs(retryScheduleMs, d.attempts);
    outcomes.inc({ outcome: delay === undefined ? 'dead' : 'failed' });
    await recordOutcome(
      app.db,
      d.id,
      delay === undefined
        ? { status: 'dead', responseStatus, error }
        : { status: 'failed', responseStatus, error, nextAttemptAt: new Date(Date.now() + delay) },
    );
  }

  const state = { stopped: false, woken: false };
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
  const nap = () =>
    new Promise<void>((resolve) => {
      sleeping = { timer: setTimeout(resolve, pollMs), resolve };
    }).finally(() => (sleeping = undefined));

  // Up to BATCH attempts in flight. The loop never waits for a whole batch: a slow receiver
  // holds only its own slot (and, by the order rule, its subject), never the other deliveries.
  const inFlight = new Set<Promise<void>>();
  async function loop(): Promise<void> {
    while (!stopped()) {
      state.woken = false;
      const room = BATCH - inFlight.size;
      let claimed: ClaimedDelivery[] = [];
      if (room > 0) {
        try {
          claimed = await claimDeliveries(app.db, room, leaseMs(timeoutMs));
        } catch (e) {
          if (!stopped()) app.log.warn({ err: e }, 'claiming webhook deliveries failed');
        }
      }
      for (const d of claimed) {
        const sending: Promise<void> = attempt(d)
          .catch((e: unknown) => {
            app.log.warn({ err: e, deliveryId: d.id }, 'recording a webhook delivery failed');
          })
          .finally(() => {
            inFlight.delete(sending);
            wake(); // a slot is free, and the next event of this subject may be due
          });
        inFlight.add(sending);
      }
      if (stopped()) break;
      if ((room === 0 || claimed.length < room) && !woken()) await nap();
    }
    await Promise.all(inFlight);
  }

  // After a write that queued deliveries has answered (and so committed), they are due now;
  // a write that queued none costs no claim.
  let seen = deliveriesQueued();
  app.addHook('onResponse', (_request, _reply, done) => {
    const now = deliveriesQueued();
    if (now !== seen) {
      seen = now;
      wake();
    }
    done();
  });

  // PostgreSQL: LISTEN on a connection of its own, so that deliveries committed by any
  // instance wake this one at once (polling stays the fallback). PGlite is one process, which
  // wakes itself after its own writes.
  const database = app.config.database;
  const listener =
    database.kind === 'postgres'
      ? postgres(database.url, { max: 1, onnotice: () => {}, connection: { application_name: 'resource-api-listen' } })
      : undefined;

  let running: Promise<void> | undefined;
  app.addHook('onReady', async () => {
    running = loop();
    if (listener !== undefined) {
      await listener
        .listen(NOTIFY_CHANNEL, () => wake())
        .catch((e: unknown) => {
          app.log.warn({ err: e }, `LISTEN ${NOTIFY_CHANNEL} failed: webhook deliveries are found by polling`);
        });
    }
  });
  app.addHook('preClose', (done) => {
    state.stopped = true;
    wake();
    done();
  });
  app.addHook('onClose', async () => {
    await running;
    await Promise.all([agent.close(), listener?.end({ timeout: 1 })]);
  });
}

export default fp(dispatcher, { name: 'webhook-dispatcher' });
