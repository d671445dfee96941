// Who decides whether a request is traced (docs/tracing.md, "Sampling"): a caller's `sampled`
// flag counts only through a trusted proxy (TRUST_PROXY); from anyone else the trace id is
// continued and the service's own ratio decides. Here the ratio is 0, so a request is traced only
// when a trusted proxy said so.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startTracing, type Tracing } from '../../src/tracing/tracing.js';
import { buildTestApp } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';

/** Trace ids of the spans an OTLP/HTTP collector (JSON) received. */
const received: string[] = [];
const collector = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const payload = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: { traceId: string }[] }[] }[] };
    for (const rs of payload.resourceSpans)
      for (const ss of rs.scopeSpans) for (const s of ss.spans) received.push(s.traceId);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));

process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
process.env.OTEL_TRACES_SAMPLER = 'parentbased_traceidratio';
process.env.OTEL_TRACES_SAMPLER_ARG = '0';
const tracing = startTracing(process.env, '0.1.0') as Tracing;

const direct = await buildTestApp({ TRUST_PROXY: 'false' });
const proxied = await buildTestApp({ TRUST_PROXY: 'true' });

afterAll(async () => {
  await tracing.shutdown();
  collector.close();
});

const traceparent = (traceId: string) => `00-${traceId}-00f067aa0ba902b7-01`;

describe('sampling a caller’s trace', () => {
  it('does not obey the sampled flag of a caller that is not a trusted proxy, and still continues its trace id', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const requests = await Promise.all(
      Array.from({ length: 20 }, () =>
        direct.app.inject({
          method: 'GET',
          url: '/api/v1/users?page=1&size=5',
          headers: { authorization: ADMIN, traceparent: traceparent(traceId) },
        }),
      ),
    );
    for (const r of requests) expect(r.statusCode).toBe(200);
    await tracing.flush();
    expect(received).not.toContain(traceId);
    // Its log lines name the caller's trace.
    const line = direct.logs.find(
      (l) => l.requestId === requests[0]!.headers['x-request-id'] && l.msg === 'request completed',
    );
    expect(line).toMatchObject({ trace_id: traceId });
  });

  it('obeys it through a trusted proxy', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const response = await proxied.app.inject({
      method: 'GET',
      url: '/api/v1/users?page=1&size=5',
      headers: { authorization: ADMIN, traceparent: traceparent(traceId), 'x-forwarded-for': '203.0.113.7' },
    });
    expect(response.statusCode).toBe(200);
    await tracing.flush();
    expect(received).toContain(traceId);
  });
});
