// Webhook delivery, wired into the app: the metrics, the wake-ups between instances (LISTEN/
// NOTIFY, db/notifications.ts), the hook that wakes the dispatcher once a write that queued
// deliveries has answered, and the dispatcher's start and stop. Requests never wait for a
// delivery: they only insert rows, and wake the dispatcher after they commit.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { subscriptionBinding } from '../../crypto/encryption.js';
import { notificationsOf } from '../../db/notifications.js';
import { onWriteResponse } from '../../http/write-hooks.js';
import { Dispatcher } from './dispatcher.js';
import { deliveryHandoff } from '../../events/index.js';
import { deliveryMetrics } from './metrics.js';
import { Sender } from './sender.js';

/** The channel an instance notifies after it queued deliveries (LISTENed by every dispatcher). */
const NOTIFY_CHANNEL = 'resource_api_webhooks';

declare module 'fastify' {
  interface FastifyInstance {
    /** Makes the dispatcher look for due deliveries now (a redelivery was asked for). */
    wakeDispatcher: () => void;
  }
}

async function webhookDelivery(app: FastifyInstance): Promise<void> {
  const { dispatch, timeoutMs, pollMs, retryScheduleMs, allowPrivateNetworks, maxInFlight } = app.config.webhooks;
  const onOutcome = deliveryMetrics(app.metrics, app.db);
  // Every instance notifies the others after its writes queued deliveries, dispatcher or not;
  // PGlite is one process, which wakes itself after its own writes.
  const notifications = notificationsOf(app.config.database, NOTIFY_CHANNEL, app.log);
  const handoff = deliveryHandoff(app.db);
  const dispatcher = dispatch
    ? new Dispatcher({
        db: app.db,
        sender: new Sender({
          timeoutMs,
          allowPrivateNetworks,
          resolveHost: app.resolveHost,
          source: `${app.config.baseUrl}/api/v1`,
          decrypt: (stored, id) => app.encryption.decrypt(stored, 'webhook-secret', subscriptionBinding(id)),
        }),
        handoff,
        timeoutMs,
        pollMs,
        retryScheduleMs,
        maxInFlight,
        onOutcome,
        log: app.log,
      })
    : undefined;
  app.decorate('wakeDispatcher', () => dispatcher?.scanSoon());

  // After a write that queued deliveries has answered (and so committed), they are due now:
  // here, and on the other instances. A write that queued none costs a comparison; a read, nothing.
  let seen = handoff.count;
  onWriteResponse(app, (_request, _reply, done) => {
    if (handoff.count !== seen) {
      seen = handoff.count;
      dispatcher?.wake();
      notifications?.notify();
    }
    done();
  });

  app.addHook('onReady', async () => {
    if (dispatcher === undefined) return;
    dispatcher.start();
    await notifications?.listen(() => dispatcher.scanSoon());
  });
  app.addHook('preClose', (done) => {
    dispatcher?.stop();
    done();
  });
  app.addHook('onClose', async () => {
    await notifications?.end();
    await dispatcher?.close();
  });
}

export default fp(webhookDelivery, { name: 'webhook-delivery' });
