// docs/webhooks.md: events are kept EVENT_RETENTION_DAYS, then deleted in the background by every
// instance (a delete of nothing is cheap), in batches.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { purgeEventsBefore } from './events.repository.js';

const BATCH = 10_000;
const EVERY_MS = 10 * 60_000;

/** Purges once: every event older than the retention, batch by batch. Returns how many. */
export async function purgeExpiredEvents(app: FastifyInstance, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - app.config.eventRetentionDays * 86_400_000);
  let total = 0;
  for (;;) {
    const deleted = await purgeEventsBefore(app.db, cutoff, BATCH);
    total += deleted;
    if (deleted < BATCH) return total;
  }
}

async function retention(app: FastifyInstance): Promise<void> {
  const timer = setInterval(() => {
    purgeExpiredEvents(app).catch((error: unknown) => {
      app.log.warn({ err: error }, 'purging expired events failed');
    });
  }, EVERY_MS);
  timer.unref();
  app.addHook('onClose', (_app, done) => {
    clearInterval(timer);
    done();
  });
}

export default fp(retention, { name: 'event-retention' });
