// The Prometheus rules of deploy/prometheus/ (docs/operations.md#objectives, docs/runbook.md):
// the service-level indicators as recording rules, the SRE workbook's multi-window,
// multi-burn-rate alerts on each objective, and the cause alerts. This file is their source; the
// YAML files are written from it, as the monitoring mixins write theirs from jsonnet:
//
//   npm run prometheus-rules                          # deploy/prometheus/resource-api.rules.yml
//   npm run prometheus-rules -- --time-scale 60 --out /tmp/rules   # every window 60 times shorter
//   npm run prometheus-rules -- --runbook-base https://git.example.org/shop/resource-api/-/blob/main/docs/runbook.md
//
// `timeScale` is the one parameter the end-to-end test changes: every window and every `for`
// is divided by it (1 h becomes 1 min at 60), nothing else: the thresholds, the objectives and
// the rules' names stay as shipped. The shipped files are scale 1, and a test holds them equal
// to what this writes.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { format, resolveConfig } from 'prettier';

export interface RuleOptions {
  /** Every window and `for` divided by this (1: as shipped). */
  timeScale: number;
  /** The label matchers that select the service's series. */
  selector: string;
  /** docs/runbook.md as the operators' browser reaches it; each alert links to its section. */
  runbookBase: string;
  /** REPLICA_MAX_LAG_MS, in seconds: a replica further behind is skipped. */
  replicaMaxLagSeconds: number;
  /** The age past which a webhook delivery should have been delivered or dead (seconds). */
  webhookMaxAgeSeconds: number;
  /** EVENT_LOOP_DELAY_LIMIT_MS, in seconds. */
  eventLoopDelaySeconds: number;
}

/**
 * WEBHOOK_RETRY_SCHEDULE's default (5s,5m,30m,2h,5h,10h,10h) is 27.6 h of waits, 33.1 h with
 * each wait 20% late (the jitter): a delivery older than that should be delivered or dead.
 */
const WEBHOOK_SCHEDULE_SECONDS = 5 + 300 + 1800 + 7200 + 18000 + 36000 + 36000;

export const DEFAULT_OPTIONS: RuleOptions = {
  timeScale: 1,
  selector: 'job="resource-api"',
  runbookBase: 'https://git.example.com/resource-api/blob/main/docs/runbook.md',
  replicaMaxLagSeconds: 5,
  webhookMaxAgeSeconds: Math.ceil((WEBHOOK_SCHEDULE_SECONDS * 1.2) / 3600) * 3600,
  eventLoopDelaySeconds: 0.25,
};

/** The objectives of docs/operations.md#objectives, over 28 days. */
export const OBJECTIVES = [
  { slo: 'availability', title: 'Availability', objective: '99.9%', budget: '0.001', allowed: '0.1%' },
  { slo: 'read_latency', title: 'Read latency', objective: '99%', budget: '0.01', allowed: '1%' },
  { slo: 'write_latency', title: 'Write latency', objective: '99%', budget: '0.01', allowed: '1%' },
] as const;

export type Slo = (typeof OBJECTIVES)[number]['slo'];

/** The windows of the indicators: the workbook's pairs, and the objective's period. */
export const WINDOWS = ['5m', '30m', '1h', '6h', '3d'] as const;

/** Paths outside the objectives: the probes (their 503 is a signal to a load balancer, not a failed request). */
const PROBES = '/api/public/health/.*';
/** Long-lived answers, outside the latency objectives: an event stream lasts as long as its client. */
const STREAMS = '/api/v[0-9]+/events/?';

const UNITS: [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
  ['ms', 1],
];

/** A Prometheus duration ("3d", "90s") divided by `scale`, written in the largest unit that holds it whole. */
export function scaled(duration: string, scale: number): string {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(duration);
  if (match === null) throw new Error(`not a duration: ${duration}`);
  const unit = UNITS.find(([u]) => u === match[2]) as [string, number];
  const ms = (Number(match[1]) * unit[1]) / scale;
  if (!Number.isInteger(ms) || ms < 1) throw new Error(`${duration} / ${scale} is not a whole number of ms`);
  const [name, size] = UNITS.find(([, size]) => ms % size === 0) as [string, number];
  return `${ms / size}${name}`;
}

export interface RecordingRule {
  record: string;
  expr: string;
}

export interface AlertingRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: { summary: string; description: string; runbook_url: string };
}

export interface Group {
  name: string;
  rules: (RecordingRule | AlertingRule)[];
}

/** The indicator's bad and total events over `w` (a range), by job. */
function events(slo: Slo, selector: string, w: string): { bad: string; total: string } {
  const sum = (metric: string, matchers: string) => `sum by (job) (rate(${metric}{${selector}${matchers}}[${w}]))`;
  if (slo === 'availability') {
    const answers = `,route!~"${PROBES}"`;
    const total = sum('http_requests_total', answers);
    // No 5xx yet is no series at all: 0 then, so that the share is 0 rather than absent.
    return { bad: `${sum('http_requests_total', `${answers},status_code=~"5.."`)}\nor\n0 * ${total}`, total };
  }
  const [methods, le] = slo === 'read_latency' ? ['GET|HEAD', '0.1'] : ['POST|PUT|PATCH|DELETE', '0.5'];
  const answered = `,method=~"${methods}",route!~"${PROBES}|${STREAMS}",status_code!~"5.."`;
  const total = sum('http_request_duration_seconds_count', answered);
  return { bad: `${total}\n-\n${sum('http_request_duration_seconds_bucket', `${answered},le="${le}"`)}`, total };
}

export const ratioName = (slo: Slo, window: string) => `job:resource_api_${slo}_errors:ratio_rate${window}`;

/**
 * One group per objective, its indicators then its alerts: a group's rules run in order, so its
 * alerts read the indicators of the same evaluation (across groups the order is not set, and an
 * alert's value would be from one evaluation or the one before).
 */
function objectiveGroups(o: RuleOptions): Group[] {
  const alerts = burnRateAlerts(o);
  return OBJECTIVES.map(({ slo, budget }) => {
    const rules: RecordingRule[] = [];
    const five = events(slo, o.selector, scaled('5m', o.timeScale));
    rules.push({ record: `job:resource_api_${slo}_requests:rate5m`, expr: five.total });
    rules.push({ record: `job:resource_api_${slo}_errors:rate5m`, expr: five.bad });
    for (const window of WINDOWS) {
      const { bad, total } = events(slo, o.selector, scaled(window, o.timeScale));
      const numerator = bad.includes('\n') ? `(\n${indent(bad)}\n)` : bad;
      rules.push({ record: ratioName(slo, window), expr: `${numerator}\n/\n${total}` });
    }
    // The objective's period from the 5-minute rates (a rate over 28 days of the raw counters
    // would read every sample of every series at each evaluation): their sums sample the same
    // instants, so their ratio is the period's.
    const d28 = scaled('28d', o.timeScale);
    rules.push({
      record: ratioName(slo, '28d'),
      expr: `sum by (job) (sum_over_time(job:resource_api_${slo}_errors:rate5m[${d28}]))\n/\nsum by (job) (sum_over_time(job:resource_api_${slo}_requests:rate5m[${d28}]))`,
    });
    rules.push({
      record: `job:resource_api_${slo}_budget_remaining:ratio28d`,
      expr: `1 - ${ratioName(slo, '28d')} / ${budget}`,
    });
    const own = alerts.filter((alert) => alert.labels.slo === slo);
    return { name: `resource-api-slo-${slo.replace('_', '-')}`, rules: [...rules, ...own] };
  });
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');

/** docs/runbook.md's anchor for a heading that is the alert's name (GitHub's slug: lower case). */
const runbook = (o: RuleOptions, alert: string) => `${o.runbookBase}#${alert.toLowerCase()}`;

function burnRateAlerts(o: RuleOptions): AlertingRule[] {
  const bad: Record<Slo, string> = {
    availability: 'answers were 5xx (refusals for overload included)',
    read_latency: 'reads (GET, HEAD) took more than 100 ms',
    write_latency: 'writes (POST, PUT, PATCH, DELETE) took more than 500 ms',
  };
  return OBJECTIVES.flatMap(({ slo, title, objective, budget, allowed }) => {
    const alert = `ResourceApi${title.replace(/ (\w)/, (_m, c: string) => c.toUpperCase()).replace(' ', '')}BudgetBurn`;
    const r = (w: string) => ratioName(slo, w);
    const what = title.toLowerCase();
    return [
      {
        alert,
        // 2% of the 28-day budget spent in an hour, or 5% in six hours: the short windows (5 m,
        // 30 m) make the page end soon after the errors do.
        expr: `(\n  ${r('1h')}{${o.selector}} > (14.4 * ${budget})\n  and\n  ${r('5m')}{${o.selector}} > (14.4 * ${budget})\n)\nor\n(\n  ${r('6h')}{${o.selector}} > (6 * ${budget})\n  and\n  ${r('30m')}{${o.selector}} > (6 * ${budget})\n)`,
        for: scaled('2m', o.timeScale),
        labels: { severity: 'critical', slo },
        annotations: {
          summary: `resource-api is spending its ${what} error budget fast`,
          description: `{{ $value | humanizePercentage }} of the ${bad[slo]} over the last hour or six hours, where the objective (${objective} over 28 days) allows ${allowed}: at this pace the 28-day budget is gone within days.`,
          runbook_url: runbook(o, alert),
        },
      },
      {
        alert,
        // The whole budget spent at this pace over 28 days: a ticket, not a page.
        expr: `${r('3d')}{${o.selector}} > ${budget}\nand\n${r('6h')}{${o.selector}} > ${budget}`,
        labels: { severity: 'warning', slo },
        annotations: {
          summary: `resource-api is spending its ${what} error budget faster than it lasts`,
          description: `{{ $value | humanizePercentage }} of the ${bad[slo]} over the last three days, where the objective (${objective} over 28 days) allows ${allowed}: at this pace the budget is spent before the 28 days are over.`,
          runbook_url: runbook(o, alert),
        },
      },
    ];
  });
}

function causeAlerts(o: RuleOptions): AlertingRule[] {
  const s = o.selector;
  const w = (d: string) => scaled(d, o.timeScale);
  const cause = (
    alert: string,
    expr: string,
    forDuration: string | undefined,
    summary: string,
    description: string,
  ): AlertingRule => ({
    alert,
    expr,
    ...(forDuration === undefined ? {} : { for: w(forDuration) }),
    labels: { severity: 'warning' },
    annotations: { summary, description, runbook_url: runbook(o, alert) },
  });
  return [
    cause(
      'ResourceApiShedding',
      `sum by (job, instance) (rate(http_requests_shed_total{${s}}[${w('5m')}]))\n/\nsum by (job, instance) (rate(http_requests_total{${s}}[${w('5m')}]))\n> 0.01`,
      '5m',
      'resource-api instance {{ $labels.instance }} has been refusing requests for overload for minutes',
      '{{ $value | humanizePercentage }} of the answers of {{ $labels.instance }} are 503s for overload (http_requests_shed_total): it is offered more than it can serve in time.',
    ),
    cause(
      'ResourceApiConcurrencyLimitAtFloor',
      `http_concurrency_limit{${s}} <= http_concurrency_limit_min{${s}}`,
      '15m',
      'resource-api instance {{ $labels.instance }} has its concurrency limit pinned at its minimum',
      'The adaptive limit of {{ $labels.instance }} has stayed at CONCURRENCY_LIMIT_MIN ({{ $value }}) for 15 minutes: the instance delivers so few answers a second that its peak throughput × the service-time target (40% of LATENCY_BUDGET_MS) is under the minimum (a slow database, a lock, a starved host).',
    ),
    cause(
      'ResourceApiDatabaseQueueTimeouts',
      `sum by (job, instance) (rate(db_pool_queue_timeouts_total{${s},pool="primary"}[${w('5m')}])) > 0`,
      '5m',
      'resource-api instance {{ $labels.instance }} refuses statements that waited too long for a database connection',
      'For 5 minutes {{ $labels.instance }} has refused {{ $value | humanize }} statements a second that waited longer than DATABASE_QUEUE_TIMEOUT_MS for a free connection of its primary pool (answered 503; a replica that is busy falls back to the primary and is not counted here).',
    ),
    cause(
      'ResourceApiDatabaseConnectionsFailing',
      `sum by (job, instance) (rate(db_pool_connection_errors_total{${s}}[${w('3m')}])) > 0`,
      '5m',
      'resource-api instance {{ $labels.instance }} cannot keep its database connections',
      'For 5 minutes the pool of {{ $labels.instance }} has failed to open database connections or lost them ({{ $value | humanize }} a second): the database is down, unreachable or refusing connections.',
    ),
    cause(
      'ResourceApiReplicaLagging',
      `max by (job, replica) (db_replica_lag_seconds{${s}}) > ${o.replicaMaxLagSeconds}`,
      '5m',
      'read replica {{ $labels.replica }} is further behind than REPLICA_MAX_LAG_MS',
      'Replica {{ $labels.replica }} has been {{ $value | humanizeDuration }} behind the primary for 5 minutes (the bound is ' +
        `${o.replicaMaxLagSeconds} s): resource-api skips it, and its reads go to the other replicas or the primary.`,
    ),
    cause(
      'ResourceApiReplicaDown',
      `max by (job, replica) (db_replica_lag_seconds{${s}}) < 0`,
      '5m',
      'read replica {{ $labels.replica }} is not answering',
      'No instance of resource-api has reached replica {{ $labels.replica }} for 5 minutes (db_replica_lag_seconds is -1): its reads go to the other replicas or the primary.',
    ),
    cause(
      'ResourceApiWebhookBacklogGrowing',
      `max by (job) (webhook_pending{${s}}) > 100\nand\nmax by (job) (deriv(webhook_pending{${s}}[${w('30m')}])) > 0`,
      '30m',
      'resource-api webhook deliveries are piling up',
      '{{ $value }} webhook deliveries are waiting to be delivered, and their number has grown for an hour: receivers fail or time out, or the dispatchers do not keep up.',
    ),
    cause(
      'ResourceApiWebhookDeliveryOverdue',
      `max by (job) (webhook_oldest_pending_seconds{${s}}) > ${o.webhookMaxAgeSeconds}`,
      '15m',
      'a resource-api webhook delivery is older than its retry schedule allows',
      `The oldest delivery not yet delivered or dead is {{ $value | humanizeDuration }} old: past the retry schedule (${o.webhookMaxAgeSeconds / 3600} h with its jitter) it should be one or the other.`,
    ),
    cause(
      'ResourceApiReadinessFlapping',
      // Three changes or more (out, in, out) in 15 minutes (increase() extrapolates: > 2.5).
      `sum by (job, instance) (increase(health_ready_changes_total{${s}}[${w('15m')}])) > 2.5`,
      undefined,
      'resource-api instance {{ $labels.instance }} goes in and out of readiness',
      'The readiness probe of {{ $labels.instance }} changed its answer {{ $value | humanize }} times in 15 minutes: its load balancer takes it out of rotation and back.',
    ),
    cause(
      'ResourceApiEventLoopLagging',
      `max by (job, instance) (nodejs_eventloop_lag_p99_seconds{${s}}) > ${o.eventLoopDelaySeconds}`,
      '5m',
      'resource-api instance {{ $labels.instance }} has its event loop lagging',
      'For 5 minutes 1% of the turns of the event loop of {{ $labels.instance }} have been late by more than {{ $value | humanizeDuration }}: every request waits that long to be read, and the backstop refuses requests.',
    ),
    cause(
      'ResourceApiMetricsDown',
      `up{${s}} == 0`,
      '5m',
      'Prometheus cannot scrape resource-api instance {{ $labels.instance }}',
      'The metrics port of {{ $labels.instance }} has not answered for 5 minutes: the instance is down, or its metrics are out of reach, and no other alert can see it.',
    ),
  ];
}

function groups(o: RuleOptions): Group[] {
  return [...objectiveGroups(o), { name: 'resource-api-causes', rules: causeAlerts(o) }];
}

/** The rules, as the file holds them (tests read them here rather than parse YAML). */
export function ruleGroups(options: Partial<RuleOptions> = {}): Group[] {
  return groups({ ...DEFAULT_OPTIONS, ...options });
}

// ---- YAML ------------------------------------------------------------------------------------

/** A string as YAML: a JSON string (YAML's double-quoted form), or a block for several lines. */
function scalar(value: string, depth: number): string {
  if (!value.includes('\n')) return JSON.stringify(value);
  const pad = ' '.repeat(depth);
  return `|-\n${value
    .split('\n')
    .map((line) => (line === '' ? '' : pad + line))
    .join('\n')}`;
}

function yaml(groups: Group[]): string {
  const lines = [
    '# Written by scripts/prometheus-rules.ts (npm run prometheus-rules): change that file, not this one.',
    '# docs/operations.md#objectives says what these rules measure; docs/runbook.md, what to do when one fires.',
    'groups:',
  ];
  for (const group of groups) {
    lines.push(`  - name: ${group.name}`, '    rules:');
    for (const rule of group.rules) {
      if ('record' in rule) {
        lines.push(`      - record: ${rule.record}`, `        expr: ${scalar(rule.expr, 10)}`);
        continue;
      }
      lines.push(`      - alert: ${rule.alert}`, `        expr: ${scalar(rule.expr, 10)}`);
      if (rule.for !== undefined) lines.push(`        for: ${rule.for}`);
      lines.push('        labels:');
      for (const [k, v] of Object.entries(rule.labels)) lines.push(`          ${k}: ${v}`);
      lines.push('        annotations:');
      for (const [k, v] of Object.entries(rule.annotations)) lines.push(`          ${k}: ${scalar(v, 12)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The rule files, by name, for `options` (the shipped ones with the defaults), as the repository formats YAML. */
export async function ruleFiles(options: Partial<RuleOptions> = {}): Promise<Record<string, string>> {
  const o = { ...DEFAULT_OPTIONS, ...options };
  const files: Record<string, string> = { [RULES_FILE]: yaml(groups(o)) };
  for (const [name, text] of Object.entries(files)) {
    const filepath = join(SHIPPED_DIR, name);
    files[name] = await format(text, { ...(await resolveConfig(filepath)), filepath });
  }
  return files;
}

/** Every alert's name (docs/runbook.md has a section for each). */
export function alertNames(): string[] {
  const rules = groups(DEFAULT_OPTIONS).flatMap((g) => g.rules);
  return [...new Set(rules.flatMap((r) => ('alert' in r ? [r.alert] : [])))];
}

export const SHIPPED_DIR = join(import.meta.dirname, '..', 'deploy', 'prometheus');
export const RULES_FILE = 'resource-api.rules.yml';

if (process.argv[1] === import.meta.filename) {
  const { values } = parseArgs({
    options: {
      'time-scale': { type: 'string', default: '1' },
      out: { type: 'string', default: SHIPPED_DIR },
      'runbook-base': { type: 'string', default: DEFAULT_OPTIONS.runbookBase },
      selector: { type: 'string', default: DEFAULT_OPTIONS.selector },
    },
  });
  mkdirSync(values.out, { recursive: true });
  const files = await ruleFiles({
    timeScale: Number(values['time-scale']),
    runbookBase: values['runbook-base'],
    selector: values.selector,
  });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(values.out, name), text);
  console.log(`wrote ${Object.keys(files).join(', ')} in ${values.out}`);
}
