// The delivery metrics (docs/webhooks.md): attempts by outcome, by this instance; and the backlog,
// which is the database's, so every instance reports the same.
import type { Registry } from 'prom-client';
import { Counter, Gauge } from 'prom-client';
import type { Db } from '../../db/database.js';
import { pendingStats } from '../deliveries.repository.js';

/**
 * How long a scrape waits for the backlog's query. A scrape must answer within its time-out
 * however the database is doing (an overloaded pool, a database gone): past this, the gauges say
 * what the last answer said; after a failed query they say NaN (unknown) until one succeeds again,
 * so that the rest of the scrape (the requests, the pool) still reaches Prometheus.
 */
const STATS_WAIT_MS = 250;

type Stats = { pending: number; oldestSeconds: number };

/** Registers the metrics; returns the outcome counter's increment. */
export function deliveryMetrics(registry: Registry, db: Db): (outcome: 'delivered' | 'failed' | 'dead') => void {
  const outcomes = new Counter({
    name: 'webhook_deliveries_total',
    help: 'Webhook delivery attempts by this instance, by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // One query answers both gauges of a scrape (and of scrapes that come while it runs).
  let running: Promise<void> | undefined;
  let last: Stats | undefined;
  const current = async (): Promise<Stats | undefined> => {
    running ??= pendingStats(db).then(
      (stats) => {
        last = stats;
        running = undefined;
      },
      () => {
        last = undefined;
        running = undefined;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([running, new Promise<void>((resolve) => (timer = setTimeout(resolve, STATS_WAIT_MS)))]);
    clearTimeout(timer);
    return last;
  };
  const gauge = (name: string, help: string, value: (stats: Stats) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const stats = await current();
        this.set(stats === undefined ? Number.NaN : value(stats));
      },
    });
  gauge('webhook_pending', 'Webhook deliveries not yet delivered or dead (all instances)', (s) => s.pending);
  gauge(
    'webhook_oldest_pending_seconds',
    'Age of the oldest webhook delivery not yet delivered or dead, in seconds (0: none)',
    (s) => s.oldestSeconds,
  );
  return (outcome) => outcomes.inc({ outcome });
}
