// npm run bench:tracing-sdk — what tracing costs a request that is left out, inside the process:
// the two ids of its span from the SDK's own generator (RandomIdGenerator: Math.random() written
// into a buffer and hex-encoded per id) and from the service's (src/tracing/ids.ts), and the
// SDK's startSpan + end for a span it will not record, with each generator behind the service's
// sampler (parentbased_traceidratio at 0, so that every span is decided and left out); and the
// service's own start of a SERVER span (src/tracing/server-spans.ts: the decision first, the
// SDK's startSpan only for a span to record) + end, for a request with no `traceparent` and for
// one that continues a caller's trace. Rounds alternate between the cases; each line is the
// median of BENCH_ROUNDS rounds.
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { NodeTracerProvider, RandomIdGenerator, type IdGenerator } from '@opentelemetry/sdk-trace-node';
import { PooledIdGenerator } from '../src/tracing/ids.js';
import { ServerSpans } from '../src/tracing/server-spans.js';
import { samplerFromEnv } from '../src/tracing/tracing.js';
import { percentile } from './lib/open-loop.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

/** ns per call of `step`, over ITERATIONS calls. */
function time(step: () => unknown): number {
  let sink: unknown;
  const start = process.hrtime.bigint();
  for (let i = 0; i < ITERATIONS; i++) sink = step();
  const ns = Number(process.hrtime.bigint() - start) / ITERATIONS;
  if (sink === 'never') console.log(sink);
  return ns;
}

const generators: [string, IdGenerator][] = [
  ['the SDK’s RandomIdGenerator', new RandomIdGenerator()],
  ['the service’s PooledIdGenerator', new PooledIdGenerator()],
];
const sampler = samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
const cases = generators.flatMap(([name, idGenerator]) => {
  const tracer = new NodeTracerProvider({ sampler, idGenerator }).getTracer('bench');
  return [
    { name: `ids (trace + span), ${name}`, step: () => idGenerator.generateTraceId() + idGenerator.generateSpanId() },
    {
      name: `startSpan + end left out, ${name}`,
      step: () => {
        const span = tracer.startSpan('GET /api/v1/users/{id}');
        span.end();
        return span;
      },
    },
  ];
});

{
  const ids = new PooledIdGenerator();
  const spans = new ServerSpans(new NodeTracerProvider({ sampler, idGenerator: ids }).getTracer('bench'), sampler, ids);
  const headers: Record<string, string> = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00' };
  const caller = new W3CTraceContextPropagator().extract(ROOT_CONTEXT, headers, {
    keys: (c: Record<string, string>) => Object.keys(c),
    get: (c: Record<string, string>, k: string) => c[k],
  });
  cases.push(
    {
      name: 'the service’s start + end left out, a new trace',
      step: () => {
        const span = spans.start('GET /api/v1/users/{id}', ROOT_CONTEXT);
        span.end();
        return span;
      },
    },
    {
      name: 'the service’s start + end left out, a caller’s trace',
      step: () => {
        const span = spans.start('GET /api/v1/users/{id}', caller);
        span.end();
        return span;
      },
    },
  );
}

for (const { step } of cases) time(step); // warm up every case before any is measured
const ns = new Map<string, number[]>(cases.map((c) => [c.name, []]));
for (let round = 0; round < ROUNDS; round++) for (const { name, step } of cases) ns.get(name)?.push(time(step));

console.log(`${ROUNDS} rounds of ${ITERATIONS} calls a case, Node ${process.version}; median ns a call (min–max)\n`);
for (const [name, xs] of ns)
  console.log(
    `${name.padEnd(62)}${percentile(xs, 50).toFixed(0).padStart(6)} ns  (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`,
  );
