// docs/operations.md#running-several-instances: Prometheus metrics on their own listener, labelled by route template.
import type { AddressInfo } from 'node:net';
import { Gauge } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { startMetricsServer } from '../../src/http/metrics.js';
import { asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const server = await startMetricsServer(app.metrics, 0, '127.0.0.1');
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
const metricsUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;

describe('GET /metrics on METRICS_PORT', () => {
  it('counts requests by method, route template and status, with latency histograms', async () => {
    const user = await createUser(app);
    await api({ method: 'GET', url: `/api/v1/users/${user.id}` });
    await api({ method: 'GET', url: `/api/v1/users/${user.id}` });
    await api({ method: 'GET', url: '/api/v1/users/987654321' });

    const response = await fetch(metricsUrl);
    const text = await response.text();

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(text).toContain('http_requests_total{method="GET",route="/api/v1/users/:id",status_code="200"} 2');
    expect(text).toContain('http_requests_total{method="GET",route="/api/v1/users/:id",status_code="404"} 1');
    expect(text).toMatch(
      /http_request_duration_seconds_bucket\{le="0\.005",method="POST",route="\/api\/v1\/users\/?",status_code="201"\} \d+/,
    );
    // The histogram of the two 200s: cumulative buckets that end at the count, a sum and a count.
    const series = 'method="GET",route="/api/v1/users/:id",status_code="200"';
    expect(text).toContain('# TYPE http_request_duration_seconds histogram');
    const buckets = [...text.matchAll(/^http_request_duration_seconds_bucket\{le="([^"]+)",(.*)\} (\S+)$/gm)]
      .filter((m) => m[2] === series)
      .map((m) => ({ le: m[1], value: Number(m[3]) }));
    expect(buckets.map((b) => b.le)).toEqual([
      '0.001',
      '0.0025',
      '0.005',
      '0.01',
      '0.025',
      '0.05',
      '0.1',
      '0.25',
      '0.5',
      '1',
      '2.5',
      '+Inf',
    ]);
    expect(buckets.every((b, i) => i === 0 || b.value >= (buckets[i - 1]?.value ?? 0))).toBe(true);
    expect(buckets.at(-1)?.value).toBe(2);
    expect(text).toContain(`http_request_duration_seconds_count{${series}} 2`);
    expect(text).toMatch(
      new RegExp(
        `^http_request_duration_seconds_sum\\{${series.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\} 0\\.\\d+$`,
        'm',
      ),
    );
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).not.toContain(`/api/v1/users/${user.id}"`);
  });

  it('is not served on the API port', async () => {
    expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
    expect((await api({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
  });

  it('exports only the families a scrape names with name[], and reads no other', async () => {
    let reads = 0;
    new Gauge({
      name: 'test_reads',
      help: 'Counts its own reads',
      registers: [app.metrics],
      collect() {
        reads++;
      },
    });
    const response = await fetch(
      `${metricsUrl}?name[]=http_requests_queued&name[]=http_concurrency_limit&name[]=no_such_metric` +
        '&name[]=__proto__&name[]=constructor&name[]=toString&name[]=%0Abad',
    );
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1])).toEqual([
      'http_requests_queued',
      'http_concurrency_limit',
    ]);
    expect(text).toMatch(/^http_requests_queued 0$/m);
    expect(text).toMatch(/^http_concurrency_limit \d+$/m);
    expect(text.endsWith('\n')).toBe(true);
    expect(reads).toBe(0);
    // No other query, and an empty list, is the whole export.
    for (const url of [`${metricsUrl}?name=http_requests_queued`, `${metricsUrl}?`]) {
      expect(await (await fetch(url)).text()).toContain('process_cpu_user_seconds_total');
    }
    expect(reads).toBe(2);
    app.metrics.removeSingleMetric('test_reads');
  });

  it('answers other paths on the metrics port with 404', async () => {
    expect((await fetch(metricsUrl.replace('/metrics', '/other'))).status).toBe(404);
  });
});

describe('log_lines_dropped_total', () => {
  it('counts the log lines that standard output did not take (docs/operations.md#logs)', async () => {
    let dropped = 0;
    const { app: counting } = await buildTestApp({}, { logLinesDropped: () => dropped });
    const series = async () =>
      /^log_lines_dropped_total (\d+)$/m.exec(await counting.metrics.metrics())?.[1] ?? 'absent';

    const before = await series();
    dropped = 7;
    const after = await series();
    dropped = 9;
    const later = await series();

    expect([before, after, later]).toEqual(['0', '7', '9']);
    expect(await counting.metrics.metrics()).toContain('# TYPE log_lines_dropped_total counter');
  });
});
