// Prometheus metrics (docs/operations.md#metrics): request counts and latencies by route template
// (the requests refused at admission among them, as route `unrouted`), and the process's own;
// served by a separate listener on METRICS_PORT, so the API port keeps its rule that everything
// outside /api/public/** needs a token.
import { createServer, type Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import type { Admission } from './overload/admission.js';
import { routeOptionsOf } from './request-context.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's metrics registry (one per app, so tests and instances never share one). */
    metrics: Registry;
  }
}

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** One (method, route, status) series: its count, and its latencies in BUCKETS (not cumulative). */
interface Series {
  labels: { method: string; route: string; status_code: string };
  count: number;
  sum: number;
  buckets: Float64Array; // BUCKETS.length + 1: the last is above every bound
}

/**
 * The request counter and latency histogram, counted in plain numbers and formatted only when
 * scraped. prom-client's labelled `inc` and `observe` hash the label set on every call, which was
 * the largest share of this plugin's per-request cost; here a request costs one Map lookup by a
 * string key and a few additions. The registry reads these as it reads its own metrics (`get()`).
 */
class RequestMetrics {
  readonly #series = new Map<string, Series>();

  record(method: string, route: string, statusCode: number, seconds: number): void {
    const key = `${method} ${route} ${statusCode}`;
    let series = this.#series.get(key);
    if (series === undefined) {
      series = {
        labels: { method, route, status_code: String(statusCode) },
        count: 0,
        sum: 0,
        buckets: new Float64Array(BUCKETS.length + 1),
      };
      this.#series.set(key, series);
    }
    series.count++;
    series.sum += seconds;
    let i = 0;
    while (i < BUCKETS.length && seconds > (BUCKETS[i] as number)) i++;
    (series.buckets[i] as number)++;
  }

  /** prom-client's metric interface: a counter of requests. */
  readonly counter = {
    name: 'http_requests_total',
    help: 'HTTP requests answered',
    type: 'counter',
    aggregator: 'sum',
    get: () => ({
      ...this.counter,
      values: [...this.#series.values()].map((s) => ({ labels: s.labels, value: s.count })),
    }),
    reset: () => {
      this.#series.clear();
    },
  };

  /** prom-client's metric interface: the latency histogram, cumulative buckets then sum and count. */
  readonly histogram = {
    name: 'http_request_duration_seconds',
    help: 'Time from request to response',
    type: 'histogram',
    aggregator: 'sum',
    get: () => {
      const name = this.histogram.name;
      const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
      for (const s of this.#series.values()) {
        let cumulative = 0;
        BUCKETS.forEach((le, i) => {
          cumulative += s.buckets[i] as number;
          values.push({ labels: { le, ...s.labels }, value: cumulative, metricName: `${name}_bucket` });
        });
        values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${name}_bucket` });
        values.push({ labels: s.labels, value: s.sum, metricName: `${name}_sum` });
        values.push({ labels: s.labels, value: s.count, metricName: `${name}_count` });
      }
      return { ...this.histogram, values };
    },
    reset: () => {
      this.#series.clear();
    },
  };
}

/** The route label of a request refused at admission, before the router saw it. */
export const UNROUTED = 'unrouted';

export interface MetricsOptions {
  admission?: Admission;
  /** Log lines dropped so far because stdout did not take them (log-destination.ts). */
  logLinesDropped?: () => number;
}

async function metrics(
  app: FastifyInstance,
  { admission, logLinesDropped = () => 0 }: MetricsOptions = {},
): Promise<void> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new RequestMetrics();
  registry.registerMetric(requests.counter as unknown as Metric);
  registry.registerMetric(requests.histogram as unknown as Metric);
  let counted = 0;
  new Counter({
    name: 'log_lines_dropped_total',
    help: 'Log lines dropped because standard output did not take them in time (docs/operations.md#logs)',
    registers: [registry],
    collect() {
      const dropped = logLinesDropped();
      this.inc(Math.max(0, dropped - counted));
      counted = dropped;
    },
  });
  app.decorate('metrics', registry);
  app.addHook('onResponse', (request, reply, done) => {
    // The route template, never the raw URL: ids would make the label set unbounded.
    requests.record(
      request.method,
      routeOptionsOf(request).url ?? 'unmatched',
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });
  // Refused before Fastify (admission.ts): an answer of the port all the same, a 503.
  if (admission !== undefined) admission.refused = (method, seconds) => requests.record(method, UNROUTED, 503, seconds);
}

export default fp(metrics, { name: 'metrics' });

/**
 * The families a scrape asks for with `name[]=` (node_exporter's `collect[]`, Prometheus'
 * `params`), at most 64 of them; undefined for all of them.
 */
function namesAsked(url: string): string[] | undefined {
  const query = url.indexOf('?');
  if (query < 0) return undefined;
  const names = new URLSearchParams(url.slice(query + 1)).getAll('name[]');
  return names.length === 0 ? undefined : [...new Set(names)].slice(0, 64);
}

/** A metric family's name as Prometheus allows it. */
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** The names of the registry's families (never a property of a plain object's: `__proto__`). */
const known = (registry: Registry): Set<string> => new Set(registry.getMetricsAsArray().map((metric) => metric.name));

/**
 * GET /metrics in the Prometheus text format, on a listener of its own; `?name[]=a&name[]=b`
 * exports only those families (at most 64; unknown names are left out), and reads no other: a
 * frequent scrape of a few gauges (the bench's) leaves the event-loop delay's histogram, which a
 * read resets, to the scrapes of the whole.
 */
export async function startMetricsServer(registry: Registry, port: number, host: string): Promise<Server> {
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    if (req.method !== 'GET' || url.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found\n');
      return;
    }
    const names = namesAsked(url);
    const exported =
      names === undefined
        ? registry.metrics()
        : Promise.all(
            names
              .filter((name) => METRIC_NAME.test(name) && known(registry).has(name))
              .map((name) => registry.getSingleMetricAsString(name)),
          ).then((families) => `${families.join('\n\n')}\n`);
    exported.then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('Metrics unavailable\n'),
    );
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
  return server;
}
