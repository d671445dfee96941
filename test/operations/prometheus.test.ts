// The service operated as docs/operations.md#alerts-and-the-dashboard says, end to end: Debian's
// Prometheus scrapes a real instance's METRICS_PORT every second, with deploy/prometheus/'s
// rules at time scale 60 (an hour of the rules is a minute here) evaluated every second. Real
// causes make the alerts fire and resolve: open-loop load past the instance's concurrency limit
// (as `npm run bench -- --overload` makes it) takes ResourceApiShedding through pending to
// firing; its database made unreachable (the TCP front of its DATABASE_URL closed) fires the
// availability page and ResourceApiDatabaseConnectionsFailing. Under the load, every query of
// deploy/grafana/'s dashboard returns data; and the metrics port exports exactly the series
// docs/operations.md#metrics lists.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLoop } from '../../bench/lib/open-loop.js';
import { dashboard } from '../../scripts/grafana-dashboard.js';
import { RULES_FILE, ruleFiles } from '../../scripts/prometheus-rules.js';
import { aUserRequest } from '../support/factories.js';
import { freePort } from '../support/private-postgres.js';
import { runServer, type ServerProcess } from '../support/process.js';
import { prometheusUnavailable, startPrometheus, type Alert, type PrometheusServer } from '../support/prometheus.js';
import { required } from '../support/required.js';
import { closeFront, listening, upstreamFor } from '../support/tcp-front.js';
import { testPostgres, withDatabase } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';
import { until } from '../support/until.js';

const FILE = 'test/operations/prometheus.test.ts';
/** The one parameter of the rules the test changes (docs/operations.md#alerts-and-the-dashboard). */
const TIME_SCALE = 60;
// .ci/run's Node 24 pass sets TEST_DATABASE_URL to the empty string: no PostgreSQL, nothing to run.
const baseUrl = testPostgres.directUrl;

describe.runIf(baseUrl !== undefined && required(FILE, prometheusUnavailable))('operated by Prometheus', () => {
  const database = `ra_ops_${randomBytes(4).toString('hex')}`;
  const databaseUrl = withDatabase(baseUrl ?? 'postgres://localhost/postgres', database);
  const admin = postgres(baseUrl ?? '', { max: 1, onnotice: () => {} });
  const sockets = new Set<Socket>();
  const target = new URL(databaseUrl);
  /** The database's way in for the service: a TCP front the test closes and opens again. */
  const front = (): Server =>
    createServer((client) => {
      const upstream = upstreamFor(client, target, sockets);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  let frontServer = front();
  let frontPort = 0;
  const received: string[] = [];
  const receiver = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received.push(String(req.headers['webhook-id']));
      res.writeHead(204).end();
    });
  });
  let server: ServerProcess;
  let prometheus: PrometheusServer;
  let metricsUrl = '';
  let api = '';
  let apiPort = 0;
  let userId = 0;
  let background: { stop: () => Promise<void> } | undefined;

  const call = async (method: string, path: string, body?: unknown) =>
    fetch(`${api}${path}`, {
      method,
      headers: { authorization: ADMIN, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(5000),
    });

  /** A steady trickle of reads and writes (and a readiness probe), as users and a load balancer make. */
  const trickle = (): { stop: () => Promise<void> } => {
    const state = { running: true };
    const loop = (async () => {
      for (let i = 0; state.running; i++) {
        const request =
          i % 10 === 0
            ? fetch(`${api}/api/public/health/ready`, { signal: AbortSignal.timeout(3000) })
            : i % 2 === 0
              ? call('GET', `/api/v1/users/${userId}`)
              : call('PATCH', `/api/v1/users/${userId}`, { name: `Ada ${i}` });
        await request.then((r) => r.arrayBuffer()).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    return {
      stop: async () => {
        state.running = false;
        await loop;
      },
    };
  };

  /** ResourceApi alerts as Prometheus has them now, `name` and optional labels. */
  const active = async (name: string, labels: Record<string, string> = {}): Promise<Alert[]> =>
    (await prometheus.alerts()).filter(
      (a) => a.labels.alertname === name && Object.entries(labels).every(([k, v]) => a.labels[k] === v),
    );

  /** Stops what the set-up started (once, whatever it got to); also when the set-up itself fails. */
  let cleaned = false;
  const cleanUp = async () => {
    if (cleaned) return;
    cleaned = true;
    await background?.stop();
    // (Unset when the set-up failed before starting them.)
    await (prometheus as PrometheusServer | undefined)?.stop();
    const service = server as ServerProcess | undefined;
    if (service?.child.exitCode === null) await service.stop('SIGKILL');
    receiver.close();
    await closeFront(frontServer, sockets);
    await admin.unsafe(`drop database if exists ${database} with (force)`).catch(() => undefined);
    await admin.end();
  };

  beforeAll(async () => {
    try {
      await setUp();
    } catch (error) {
      await cleanUp();
      throw error;
    }
  }, 120_000);
  afterAll(cleanUp, 60_000);

  async function setUp(): Promise<void> {
    await admin.unsafe(`create database ${database}`);
    frontPort = Number(new URL(await listening(frontServer, target)).port);
    const frontUrl = new URL(databaseUrl);
    frontUrl.host = `127.0.0.1:${frontPort}`;
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const metricsPort = await freePort();
    server = await runServer({
      DATABASE_URL: frontUrl.toString(),
      // A replica list that names the primary itself, directly: the replica series exist.
      DATABASE_REPLICA_URLS: databaseUrl,
      METRICS_PORT: String(metricsPort),
      // Quotas on (their series exist), none of them reached.
      RATE_LIMIT_PER_MINUTE: '10000000',
      RATE_LIMIT_ANONYMOUS_PER_MINUTE: '10000000',
      // A limit the open loop below is sure to pass on any host.
      CONCURRENCY_LIMIT_MIN: '1',
      CONCURRENCY_LIMIT_MAX: '2',
      WEBHOOK_DISPATCHER: 'true',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_POLL_MS: '200',
    }).ready;
    // A worker torn down before the clean-up ran leaves no service behind.
    const child = server.child;
    process.once('exit', () => child.kill('SIGKILL'));
    api = server.url;
    apiPort = Number(new URL(api).port);
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    prometheus = await startPrometheus([`127.0.0.1:${metricsPort}`], {
      [RULES_FILE]: (await ruleFiles({ timeScale: TIME_SCALE }))[RULES_FILE] as string,
    });

    // Some of everything, so that every series exists: a user, a subscription and its delivery.
    const subscription = await call('POST', '/api/v1/webhook-subscriptions', {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
      events: ['user.created'],
    });
    expect(subscription.status, await subscription.clone().text()).toBe(201);
    const user = await call('POST', '/api/v1/users', aUserRequest());
    expect(user.status).toBe(201);
    userId = ((await user.json()) as { id: number }).id;
    await until('the webhook delivered', () => received.length > 0, 15_000);
    background = trickle();
    await until(
      'Prometheus has scraped the service',
      async () => (await prometheus.query('job:resource_api_availability_errors:ratio_rate5m')).length > 0,
      30_000,
    ).catch(async (error: unknown) => {
      throw new Error(`${String(error)}: ${await prometheus.diagnosis()}`);
    });
  }

  it('exports exactly the series docs/operations.md#metrics lists, with their labels', async () => {
    const text = await (await fetch(metricsUrl)).text();
    const exported = families(text);
    const documented = documentedSeries();
    const grouped = (name: string) => documented.prefixes.some((prefix) => name.startsWith(prefix));

    const own = [...exported].filter(([name]) => !grouped(name));
    expect(Object.fromEntries(own.map(([name, labels]) => [name, [...labels].sort()]))).toEqual(
      Object.fromEntries([...documented.series].map(([name, labels]) => [name, [...labels].sort()])),
    );
    // Each group by prefix stands for some series of the process's own.
    for (const prefix of documented.prefixes) expect([...exported.keys()].some((n) => n.startsWith(prefix))).toBe(true);
  });

  it('takes ResourceApiShedding through pending to firing under open-loop load past the limit, and every panel of the dashboard returns data meanwhile', async () => {
    const states = new Set<string>();
    const watching = { on: true };
    const watch = (async () => {
      while (watching.on) {
        for (const alert of await active('ResourceApiShedding')) states.add(alert.state);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    const load = openLoop({
      port: apiPort,
      rate: 250,
      seconds: 25,
      connections: 64,
      headers: { authorization: ADMIN },
      plan: () => ({ method: 'GET', path: '/api/v1/users?page=1&size=50' }),
    });

    await until('ResourceApiShedding firing', () => states.has('firing'), 25_000);
    const panels = await dashboardResults(prometheus);
    const result = await load;
    watching.on = false;
    await watch;

    expect(states).toEqual(new Set(['pending', 'firing']));
    expect(result.statuses.get(503) ?? 0).toBeGreaterThan(result.offered * 0.05);
    expect(panels.filter((p) => p.error !== undefined || p.series === 0)).toEqual([]);
    expect(panels.length).toBeGreaterThan(25);
    // The load is over: the alert resolves once its window (5 minutes at scale 1) is past it.
    await until('ResourceApiShedding resolved', async () => (await active('ResourceApiShedding')).length === 0, 30_000);
  }, 120_000);

  it('pages for availability and fires ResourceApiDatabaseConnectionsFailing while the database is unreachable; both resolve once it is back', async () => {
    const page = { alertname: 'ResourceApiAvailabilityBudgetBurn', severity: 'critical' };
    // The refusals of the load above spent budget too: the page they caused ends first.
    await until('no page', async () => (await active(page.alertname, { severity: 'critical' })).length === 0, 60_000);

    await closeFront(frontServer, sockets);
    const unreachableAt = Date.now();
    await until(
      'the page and the pool alert firing',
      async () =>
        (await active(page.alertname, { severity: 'critical' })).some((a) => a.state === 'firing') &&
        (await active('ResourceApiDatabaseConnectionsFailing')).some((a) => a.state === 'firing'),
      60_000,
    );
    const firedAfter = Date.now() - unreachableAt;
    // The metrics port kept answering without its database (the backlog's gauges unknown meanwhile).
    expect((await prometheus.query('up{job="resource-api"}')).map((s) => s.value[1])).toEqual(['1']);
    expect((await prometheus.query('webhook_pending')).map((s) => s.value[1])).toEqual(['NaN']);
    frontServer = front();
    await listening(frontServer, target, frontPort);
    const backAt = Date.now();
    await until(
      'the user served again',
      async () => (await call('GET', `/api/v1/users/${userId}`).catch(() => undefined))?.status === 200,
      15_000,
    );
    await until(
      'both resolved',
      async () =>
        (await active(page.alertname, { severity: 'critical' })).length === 0 &&
        (await active('ResourceApiDatabaseConnectionsFailing')).length === 0,
      90_000,
    );

    // Seconds here are the rules' minutes: both fired within minutes of the cause and ended
    // within the page's short windows (5 and 30 minutes) of its end.
    expect(firedAfter).toBeLessThan(30_000);
    expect(Date.now() - backAt).toBeLessThan(60_000);
  }, 180_000);
});

/** The metric families of an exposition (the TYPE lines), each with the labels its samples carry. */
function families(text: string): Map<string, Set<string>> {
  const types = new Map<string, string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(name as string, type as string);
  const found = new Map<string, Set<string>>([...types.keys()].map((name) => [name, new Set<string>()]));
  for (const [, sample, labels = ''] of text.matchAll(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$/gm)) {
    const family = types.has(sample as string)
      ? (sample as string)
      : (sample as string).replace(/_(bucket|sum|count)$/, '');
    const set = found.get(family);
    if (set === undefined) throw new Error(`a sample of no family: ${sample}`);
    for (const [, label] of labels.matchAll(/(\w+)="(?:[^"\\]|\\.)*"/g))
      if (!(label === 'le' && types.get(family) === 'histogram')) set.add(label as string);
  }
  return found;
}

/** docs/operations.md's Metrics table: each series and its labels, and the groups named by prefix. */
function documentedSeries(): { series: Map<string, Set<string>>; prefixes: string[] } {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
  const section = doc.slice(doc.indexOf('\n## Metrics\n'));
  const series = new Map<string, Set<string>>();
  const prefixes: string[] = [];
  for (const [, first, labels] of section.matchAll(/^\| (`[^|]+`) \|[^|]*\|([^|]*)\|/gm)) {
    const names = [...(first as string).matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);
    for (const name of names) {
      if (name.endsWith('*')) prefixes.push(name.slice(0, -1));
      else series.set(name, new Set([...(labels as string).matchAll(/`(\w+)`/g)].map((m) => m[1] as string)));
    }
  }
  return { series, prefixes };
}

/** Every query of the dashboard, its variables given values, run as an instant query. */
async function dashboardResults(prometheus: PrometheusServer) {
  const panels = (dashboard().panels as { type: string; title: string; targets?: { expr: string }[] }[]).filter(
    (p) => p.type !== 'row',
  );
  const results: { panel: string; expr: string; series: number; error?: string }[] = [];
  for (const panel of panels) {
    for (const { expr } of panel.targets ?? []) {
      const query = expr
        .replaceAll('$__rate_interval', '10s')
        .replaceAll('$job', 'resource-api')
        .replaceAll('$instance', '.*');
      try {
        results.push({ panel: panel.title, expr: query, series: (await prometheus.query(query)).length });
      } catch (error) {
        results.push({ panel: panel.title, expr: query, series: 0, error: String(error) });
      }
    }
  }
  return results;
}
