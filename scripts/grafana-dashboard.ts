// The Grafana dashboard of deploy/grafana/ (docs/operations.md#alerts-and-the-dashboard): the
// objectives and their budgets, traffic, errors, latency, saturation (concurrency, the pool, the
// event loop), webhooks and replicas, on the series of docs/operations.md#metrics and the
// recording rules of deploy/prometheus/. This file is its source (npm run grafana-dashboard);
// the JSON is provisionable as it is (a file provider, or an import), its data source a variable.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { format, resolveConfig } from 'prettier';
import { OBJECTIVES } from './prometheus-rules.js';

export const DASHBOARD_FILE = join(import.meta.dirname, '..', 'deploy', 'grafana', 'resource-api.json');

interface Target {
  expr: string;
  legendFormat: string;
}

interface PanelSpec {
  title: string;
  description: string;
  type: 'timeseries' | 'stat';
  unit: string;
  targets: Target[];
  /** Width in grid columns (of 24). */
  width: number;
}

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };
const SERVICE = 'job="$job",instance=~"$instance"';
/** As the objectives' indicators leave them out (deploy/prometheus/). */
const PROBES = 'route!~"/api/public/health/.*"';
const PROBES_AND_STREAMS = 'route!~"/api/public/health/.*|/api/v[0-9]+/events/?"';
const rate = (metric: string, matchers = '') => `rate(${metric}{${SERVICE}${matchers}}[$__rate_interval])`;

const t = (expr: string, legendFormat = '__auto'): Target => ({ expr, legendFormat });
const panel = (
  title: string,
  description: string,
  unit: string,
  targets: Target[],
  options: { type?: PanelSpec['type']; width?: number } = {},
): PanelSpec => ({
  title,
  description,
  type: options.type ?? 'timeseries',
  unit,
  targets,
  width: options.width ?? 8,
});

const latency = (q: number, methods: string) =>
  `histogram_quantile(${q}, sum by (le) (${rate('http_request_duration_seconds_bucket', `,method=~"${methods}",${PROBES_AND_STREAMS},status_code!~"5.."`)}))`;

/** The dashboard's rows, each a title and its panels. */
export function rows(): { title: string; panels: PanelSpec[] }[] {
  return [
    {
      title: 'Objectives (28 days)',
      panels: [
        ...OBJECTIVES.map(({ slo, title, objective }) =>
          panel(
            `${title}: budget left`,
            `The share of the 28-day error budget of the ${title.toLowerCase()} objective (${objective}) not yet spent: 100% untouched, 0 spent, below 0 overspent.`,
            'percentunit',
            [t(`job:resource_api_${slo}_budget_remaining:ratio28d{job="$job"}`, title)],
            { type: 'stat', width: 6 },
          ),
        ),
        panel(
          'Alerts firing',
          "resource-api's alerts firing now (docs/runbook.md has a section for each).",
          'none',
          [t('count(ALERTS{alertname=~"ResourceApi.*",alertstate="firing"}) or vector(0)', 'firing')],
          { type: 'stat', width: 6 },
        ),
        panel(
          'Burn rate over the last hour',
          'How fast each objective spends its budget (1: exactly as fast as it lasts 28 days). The page fires at 14.4 over the hour (and 5 minutes), or 6 over six hours (and 30 minutes).',
          'none',
          OBJECTIVES.map(({ slo, title, budget }) =>
            t(`job:resource_api_${slo}_errors:ratio_rate1h{job="$job"} / ${budget}`, title),
          ),
          { width: 12 },
        ),
        panel(
          'Good answers over 28 days',
          'Each indicator over the objective period: the share of answers that met it.',
          'percentunit',
          OBJECTIVES.map(({ slo, title }) => t(`1 - job:resource_api_${slo}_errors:ratio_rate28d{job="$job"}`, title)),
          { width: 12 },
        ),
      ],
    },
    {
      title: 'Traffic',
      panels: [
        panel('Answers by method', 'Answers of the API port a second.', 'reqps', [
          t(`sum by (method) (${rate('http_requests_total')})`, '{{method}}'),
        ]),
        panel('Busiest routes', 'The ten routes answering most (route templates).', 'reqps', [
          t(`topk(10, sum by (method, route) (${rate('http_requests_total')}))`, '{{method}} {{route}}'),
        ]),
        panel('Answers by instance', 'How the load balancer spreads the load.', 'reqps', [
          t(`sum by (instance) (${rate('http_requests_total')})`, '{{instance}}'),
        ]),
      ],
    },
    {
      title: 'Errors',
      panels: [
        panel(
          'Share of answers that are 5xx',
          'The availability indicator (probes apart), refusals for overload included.',
          'percentunit',
          [
            t(
              `sum(${rate('http_requests_total', `,${PROBES},status_code=~"5.."`)}) / sum(${rate('http_requests_total', `,${PROBES}`)})`,
              '5xx',
            ),
          ],
        ),
        panel('Answers by status', 'Answers a second by status code.', 'reqps', [
          t(`sum by (status_code) (${rate('http_requests_total')})`, '{{status_code}}'),
        ]),
        panel(
          'Refused for overload',
          'Requests refused with 503 a second, by reason: limit (the concurrency limit), queue (waited for a database connection), event_loop (the backstop).',
          'reqps',
          [t(`sum by (reason) (${rate('http_requests_shed_total')})`, '{{reason}}')],
        ),
      ],
    },
    {
      title: 'Latency',
      panels: [
        panel(
          'Reads (GET, HEAD)',
          'Latency quantiles of reads that were not 5xx; the objective: 99% within 100 ms.',
          's',
          [t(latency(0.5, 'GET|HEAD'), 'p50'), t(latency(0.99, 'GET|HEAD'), 'p99')],
        ),
        panel(
          'Writes (POST, PUT, PATCH, DELETE)',
          'Latency quantiles of writes that were not 5xx; the objective: 99% within 500 ms.',
          's',
          [t(latency(0.5, 'POST|PUT|PATCH|DELETE'), 'p50'), t(latency(0.99, 'POST|PUT|PATCH|DELETE'), 'p99')],
        ),
        panel('Slowest routes (p99)', 'The ten routes with the highest 99th percentile.', 's', [
          t(
            `topk(10, histogram_quantile(0.99, sum by (method, route, le) (${rate('http_request_duration_seconds_bucket', `,${PROBES_AND_STREAMS}`)})))`,
            '{{method}} {{route}}',
          ),
        ]),
      ],
    },
    {
      title: 'Saturation',
      panels: [
        panel(
          'Concurrency',
          'Requests executing against the adaptive limit, those waiting in the admission queue, and the floor the limit never falls below.',
          'none',
          [
            t(`sum by (instance) (http_requests_in_flight{${SERVICE}})`, 'in flight {{instance}}'),
            t(`sum by (instance) (http_requests_queued{${SERVICE}})`, 'queued {{instance}}'),
            t(`sum by (instance) (http_concurrency_limit{${SERVICE}})`, 'limit {{instance}}'),
            t(`sum by (instance) (http_concurrency_limit_min{${SERVICE}})`, 'floor {{instance}}'),
          ],
        ),
        panel('Database pool', 'Connections open and statements waiting for one (PostgreSQL).', 'none', [
          t(`sum by (instance) (db_pool_connections{${SERVICE}})`, 'open {{instance}}'),
          t(`sum by (instance) (db_pool_statements_waiting{${SERVICE}})`, 'waiting {{instance}}'),
        ]),
        panel(
          'Database pool failures',
          'Statements refused after DATABASE_QUEUE_TIMEOUT_MS, and connections that failed or were lost, a second.',
          'ops',
          [
            t(`sum by (instance) (${rate('db_pool_queue_timeouts_total')})`, 'queue time-outs {{instance}}'),
            t(`sum by (instance) (${rate('db_pool_connection_errors_total')})`, 'connection errors {{instance}}'),
          ],
        ),
        panel('Event loop lag', 'The 99th percentile of how late the event loop ran its turns.', 's', [
          t(`max by (instance) (nodejs_eventloop_lag_p99_seconds{${SERVICE}})`, '{{instance}}'),
        ]),
        panel('CPU', 'CPU used by each instance (1: one core).', 'none', [
          t(`sum by (instance) (${rate('process_cpu_seconds_total')})`, '{{instance}}'),
        ]),
        panel('Readiness', 'What the readiness probe last answered (1 ready, 0 not).', 'none', [
          t(`max by (instance) (health_ready{${SERVICE}})`, '{{instance}}'),
        ]),
      ],
    },
    {
      title: 'Webhooks and event streams',
      panels: [
        panel('Deliveries waiting', 'Deliveries not yet delivered or dead (the whole database).', 'none', [
          t(`max(webhook_pending{${SERVICE}})`, 'waiting'),
        ]),
        panel('Oldest delivery waiting', 'Its age; past the retry schedule (34 h by default) it is overdue.', 's', [
          t(`max(webhook_oldest_pending_seconds{${SERVICE}})`, 'oldest'),
        ]),
        panel('Delivery attempts', 'Attempts a second, by outcome.', 'ops', [
          t(`sum by (outcome) (${rate('webhook_deliveries_total')})`, '{{outcome}}'),
        ]),
        panel('Event streams open', 'Server-Sent Event streams open, all instances.', 'none', [
          t(`sum(event_streams_open{${SERVICE}})`, 'open'),
        ]),
      ],
    },
    {
      title: 'Read replicas',
      panels: [
        panel(
          'Replica lag',
          'How far each replica is behind the primary (-1: down); past REPLICA_MAX_LAG_MS it is skipped.',
          's',
          [t(`max by (replica) (db_replica_lag_seconds{${SERVICE}})`, '{{replica}}')],
          { width: 12 },
        ),
        panel(
          'Statements by target',
          'Statements a second sent to the primary and to the replicas.',
          'ops',
          [t(`sum by (target) (${rate('db_queries_total')})`, '{{target}}')],
          { width: 12 },
        ),
      ],
    },
  ];
}

/** The dashboard as Grafana's JSON model. */
export function dashboard(): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of rows()) {
    panels.push({
      id: id++,
      type: 'row',
      title: row.title,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
      panels: [],
    });
    y += 1;
    let x = 0;
    let line = 0; // the height of the panels of this line so far
    for (const p of row.panels) {
      const h = p.type === 'stat' ? 4 : 8;
      if (x + p.width > 24) {
        x = 0;
        y += line;
        line = 0;
      }
      line = Math.max(line, h);
      panels.push({
        id: id++,
        type: p.type,
        title: p.title,
        description: p.description,
        datasource: DATASOURCE,
        gridPos: { h, w: p.width, x, y },
        fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
        options:
          p.type === 'stat'
            ? { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false }, colorMode: 'value' }
            : { legend: { displayMode: 'list', placement: 'bottom', showLegend: true }, tooltip: { mode: 'multi' } },
        targets: p.targets.map((target, i) => ({
          refId: String.fromCharCode(65 + i),
          datasource: DATASOURCE,
          expr: target.expr,
          legendFormat: target.legendFormat,
        })),
      });
      x += p.width;
    }
    y += line;
  }
  const variable = (name: string, label: string, query: string, all: boolean) => ({
    name,
    label,
    type: 'query',
    datasource: DATASOURCE,
    definition: query,
    query: { query, refId: name },
    refresh: 2,
    sort: 1,
    includeAll: all,
    multi: all,
    ...(all ? { allValue: '.*', current: { text: 'All', value: '$__all' } } : {}),
  });
  return {
    uid: 'resource-api',
    title: 'resource-api',
    description:
      'Objectives and budgets, traffic, errors, latency, saturation, webhooks and replicas (docs/operations.md).',
    tags: ['resource-api'],
    editable: true,
    graphTooltip: 1,
    schemaVersion: 39,
    version: 1,
    refresh: '30s',
    time: { from: 'now-6h', to: 'now' },
    timepicker: {},
    timezone: '',
    links: [],
    annotations: { list: [] },
    templating: {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0 },
        variable('job', 'Job', 'label_values(http_requests_total, job)', false),
        variable('instance', 'Instance', 'label_values(http_requests_total{job="$job"}, instance)', true),
      ],
    },
    panels,
  };
}

/** The file's text, as the repository formats JSON. */
export async function dashboardText(): Promise<string> {
  return format(JSON.stringify(dashboard()), { ...(await resolveConfig(DASHBOARD_FILE)), filepath: DASHBOARD_FILE });
}

if (process.argv[1] === import.meta.filename) {
  writeFileSync(DASHBOARD_FILE, await dashboardText());
  console.log(`wrote ${DASHBOARD_FILE}`);
}
