// The delivery metrics (docs/webhooks.md): attempts by outcome, by this instance; and the backlog,
// which is the database's, so every instance reports the same.
import type { Registry } from 'prom-client';
import { Counter, Gauge } from 'prom-client';
import type { Db } from '../../db/database.js';
import { pendingStats } from '../deliveries.repository.js';

/** Registers the metrics; returns the outcome counter's increment. */
export function deliveryMetrics(registry: Registry, db: Db): (outcome: 'delivered' | 'failed' | 'dead') => void {
  const outcomes = new Counter({
    name: 'webhook_deliveries_total',
    help: 'Webhook delivery attempts by this instance, by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // One query answers both gauges of a scrape.
  let stats: Promise<{ pending: number; oldestSeconds: number }> | undefined;
  const pendingStatsOnce = () => (stats ??= pendingStats(db).finally(() => (stats = undefined)));
  new Gauge({
    name: 'webhook_pending',
    help: 'Webhook deliveries not yet delivered or dead (all instances)',
    registers: [registry],
    async collect() {
      this.set((await pendingStatsOnce()).pending);
    },
  });
  new Gauge({
    name: 'webhook_oldest_pending_seconds',
    help: 'Age of the oldest webhook delivery not yet delivered or dead, in seconds (0: none)',
    registers: [registry],
    async collect() {
      this.set((await pendingStatsOnce()).oldestSeconds);
    },
  });
  return (outcome) => outcomes.inc({ outcome });
}
