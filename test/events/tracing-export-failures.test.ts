// A trace export that fails reaches the service's log (src/tracing/tracing.ts, logTo): a
// collector that refuses what it is sent. OpenTelemetry reports them through its
// diagnostic logger, which goes nowhere unless one is set; the service sets one that writes at
// warn, at most a line every EXPORT_LOG_EVERY_MS with how many were left out.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { EXPORT_LOG_EVERY_MS, startTracing, type Tracing } from '../../src/tracing/tracing.js';
import { asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { until } from '../support/until.js';

// A collector that takes each export and answers 400 (a refusal the exporter does not retry).
let posts = 0;
const collector = createServer((req, res) => {
  posts++;
  req.resume();
  req.on('end', () => res.writeHead(400, { 'content-type': 'application/json' }).end('{}'));
});
await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
const port = (collector.address() as AddressInfo).port;

process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
process.env.OTEL_BSP_SCHEDULE_DELAY = '50';
const tracing = startTracing(process.env, '0.1.0') as Tracing;
const lines: { fields: { suppressed: number }; message: string }[] = [];
tracing.logTo((fields, message) => lines.push({ fields, message }));

const { app } = await buildTestApp();
const api = asAdmin(app);
afterAll(async () => {
  await tracing.shutdown();
  collector.closeAllConnections();
  await new Promise((resolve) => collector.close(resolve));
});

describe('a trace export that fails', () => {
  it('is told in the log at warn, once per window however many fail', async () => {
    const user = await createUser(app);
    await api({ method: 'GET', url: `/api/v1/users/${user.id}` });
    const first = await until('the warn line', () => lines[0]);
    expect(first.message).toMatch(/^tracing: /);
    expect(first.message).toMatch(/400|export/i);
    // More requests, more failed exports within the window: no second line.
    for (let i = 0; i < 3; i++) {
      await api({ method: 'GET', url: `/api/v1/users/${user.id}` });
      const before = posts;
      await until('another export', () => posts > before);
    }
    expect(lines).toHaveLength(1);
    expect(EXPORT_LOG_EVERY_MS).toBeGreaterThan(1000);
  });
});
