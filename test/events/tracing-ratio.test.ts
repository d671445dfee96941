// Sampling at a ratio (docs/tracing.md, "What it costs"): the service takes the decision before
// it starts a request's SERVER span (src/tracing/server-spans.ts), so that a request left out
// skips the SDK's startSpan. What must hold: the requests traced are exactly those the SDK's own
// ratio sampler picks by their trace id, each exported under the trace and span ids its log
// lines name; a request left out still names a trace and a span of its own on its lines, and
// a caller's trace id is continued either way.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-node';
import { afterAll, describe, expect, it } from 'vitest';
import { startTracing, type Tracing } from '../../src/tracing/tracing.js';
import { buildTestApp } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';

const RATIO = 0.5;

/** The SERVER spans an OTLP/HTTP collector (JSON) received. */
const received: { traceId: string; spanId: string; name: string }[] = [];
const collector = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const payload = JSON.parse(body) as {
      resourceSpans: { scopeSpans: { spans: { traceId: string; spanId: string; name: string; kind: number }[] }[] }[];
    };
    for (const rs of payload.resourceSpans)
      for (const ss of rs.scopeSpans) for (const s of ss.spans) if (s.kind === 2) received.push(s);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));

process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
process.env.OTEL_TRACES_SAMPLER = 'parentbased_traceidratio';
process.env.OTEL_TRACES_SAMPLER_ARG = String(RATIO);
const tracing = startTracing(process.env, '0.1.0') as Tracing;
const { app, logs } = await buildTestApp({ TRUST_PROXY: 'false' });

afterAll(async () => {
  await tracing.shutdown();
  collector.close();
});

/** Whether the SDK's own ratio sampler samples a new trace with this id. */
const sdkSamples = (traceId: string) =>
  new TraceIdRatioBasedSampler(RATIO).shouldSample(ROOT_CONTEXT, traceId).decision ===
  SamplingDecision.RECORD_AND_SAMPLED;

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

/** The access line of a response. */
const accessLine = (requestId: unknown) => {
  const line = logs.find((l) => l.requestId === requestId && l.msg === 'request completed');
  expect(line).toBeDefined();
  return line as { trace_id: string; span_id: string };
};

describe('sampling at a ratio', () => {
  it('traces exactly the new traces the SDK’s ratio sampler picks, under the ids their log lines name', async () => {
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        app.inject({ method: 'GET', url: `/api/v1/users/${String(900_000 + i)}`, headers: { authorization: ADMIN } }),
      ),
    );
    const lines = responses.map((r) => {
      expect(r.statusCode).toBe(404);
      return accessLine(r.headers['x-request-id']);
    });
    await tracing.flush();

    for (const line of lines) {
      expect(line.trace_id).toMatch(HEX32);
      expect(line.span_id).toMatch(HEX16);
    }
    // Every request a trace of its own, sampled or not.
    expect(new Set(lines.map((l) => l.trace_id)).size).toBe(lines.length);
    const picked = lines.filter((l) => sdkSamples(l.trace_id));
    // At 0.5, sixty new traces on each side (a chance of 2 × 2⁻⁶⁰ of none on one).
    expect(picked.length).toBeGreaterThan(0);
    expect(picked.length).toBeLessThan(lines.length);
    const mine = received.filter((s) => s.name === 'GET /api/v1/users/:id');
    expect(mine.map((s) => `${s.traceId}/${s.spanId}`).sort()).toEqual(
      picked.map((l) => `${l.trace_id}/${l.span_id}`).sort(),
    );
  });

  it('continues a caller’s trace id, with a span id of its own, sampled or not', async () => {
    const traceId = 'a0000000000000000000000000000001';
    const r = await app.inject({
      method: 'GET',
      url: '/api/v1/users/987654',
      // Not a trusted proxy: its flag `01` is not obeyed, the ratio decides (tracing-sampling.test.ts).
      headers: { authorization: ADMIN, traceparent: `00-${traceId}-00f067aa0ba902b7-00` },
    });
    const line = accessLine(r.headers['x-request-id']);
    expect(line.trace_id).toBe(traceId);
    expect(line.span_id).toMatch(HEX16);
    expect(line.span_id).not.toBe('00f067aa0ba902b7');
  });
});
