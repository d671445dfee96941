// OpenTelemetry tracing (docs/tracing.md). Off unless an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); then spans go out over
// OTLP/HTTP, protobuf or JSON, configured by the standard OTEL_* variables only, through the
// OpenTelemetry JS SDK: the exporter reads its endpoint, headers, time-out and compression, the
// batch processor its OTEL_BSP_* settings, the provider its sampler (OTEL_TRACES_SAMPLER, _ARG)
// and the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
//
// What the SDK does not know is done here, once: the SERVER span of a request
// (http-spans.ts), a CLIENT span per database statement (db-spans.ts, called by both
// dialects), the trace context an event keeps for its webhook deliveries, and the trace ids on
// log lines. With tracing off, `tracer()` is undefined and each of those is one comparison.
// Nothing enters OpenTelemetry's async context (see db-spans.ts): the spans travel with the
// request and its database handle.
import {
  createContextKey,
  diag,
  DiagLogLevel,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanKind,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SamplingResult,
} from '@opentelemetry/sdk-trace-node';
import { PooledIdGenerator } from './ids.js';
import { decidedIn, ServerSpans } from './server-spans.js';

export type Env = Record<string, string | undefined>;

let active: Tracer | undefined;
let serverSpans: ServerSpans | undefined;

/** The service's tracer while tracing is on; undefined when it is off. */
export function tracer(): Tracer | undefined {
  return active;
}

/** What starts requests' SERVER spans (server-spans.ts) while tracing is on; undefined when it is off. */
export function serverSpanStarter(): ServerSpans | undefined {
  return serverSpans;
}

export interface Tracing {
  /** Sends what is buffered (tests, and shutdown). */
  flush(): Promise<void>;
  /**
   * Flushes and stops: no span is recorded afterwards. A final export that fails is told through
   * `logTo`'s line (every line while shutting down), not thrown.
   */
  shutdown(): Promise<void>;
  /**
   * Where the SDK's own warnings and errors go (a failed export: a refused connection, a 4xx or
   * 5xx from the collector): `warn`, at most one line per EXPORT_LOG_EVERY_MS, with how many were
   * left out since the last. Until called, they go nowhere (OpenTelemetry's default).
   */
  logTo(warn: (fields: { suppressed: number }, message: string) => void): void;
}

/** At most one line of the SDK's diagnostics per this time. */
export const EXPORT_LOG_EVERY_MS = 10_000;

const set = (value: string | undefined) => (value === undefined || value.trim() === '' ? undefined : value.trim());

/** Whether the environment turns tracing on: an OTLP endpoint for traces is set. */
export function tracingRequested(env: Env): boolean {
  return (
    set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) !== undefined || set(env.OTEL_EXPORTER_OTLP_ENDPOINT) !== undefined
  );
}

/** The OTLP protocol asked for; only the HTTP ones are served (a message otherwise). */
export function otlpProtocol(env: Env): 'http/protobuf' | 'http/json' | { invalid: string } {
  const protocol =
    set(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? set(env.OTEL_EXPORTER_OTLP_PROTOCOL) ?? 'http/protobuf';
  if (protocol === 'http/protobuf' || protocol === 'http/json') return protocol;
  const name =
    set(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) === undefined
      ? 'OTEL_EXPORTER_OTLP_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  return {
    invalid: `Invalid configuration: ${name} must be http/protobuf or http/json (got ${JSON.stringify(protocol)})`,
  };
}

/** The OTEL_TRACES_SAMPLER values served: the SDK's own, less the remote ones (jaeger_remote, xray). */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLERS)[number];

/**
 * OTEL_TRACES_SAMPLER and, for the ratio samplers, OTEL_TRACES_SAMPLER_ARG (a ratio from 0 to 1,
 * default 1), or a one-line message: a misspelt sampler must not sample everything silently.
 */
export function samplerSetting(env: Env): { name: SamplerName; ratio: number } | { invalid: string } {
  const given = set(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on';
  const name = SAMPLERS.find((known) => known === given);
  if (name === undefined)
    return {
      invalid: `Invalid configuration: OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')} (got ${JSON.stringify(given)})`,
    };
  if (name.endsWith('always_off')) return { name, ratio: 0 };
  if (!name.endsWith('traceidratio')) return { name, ratio: 1 };
  const arg = set(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1)
    return {
      invalid: `Invalid configuration: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1 for ${name} (got ${JSON.stringify(arg)})`,
    };
  return { name, ratio };
}

/**
 * Marks a request's extracted context when its caller is not a trusted proxy (http-spans.ts):
 * the caller's trace id is continued, but its `sampled` flag is not obeyed.
 */
export const UNTRUSTED_PARENT = createContextKey('resource-api: the parent came from an untrusted caller');

/**
 * The sampler of OTEL_TRACES_SAMPLER and _ARG (the SDK's standard names), except that a parent
 * from an untrusted caller (UNTRUSTED_PARENT) is decided as a new trace is: at the configured
 * ratio, by a random draw (not by the trace id, which that caller chose). Otherwise any client
 * could have every one of its requests traced by sending `traceparent` with the flag `01`.
 */
export function samplerFromEnv(env: Env): Sampler {
  const setting = samplerSetting(env);
  if ('invalid' in setting) throw new Error(setting.invalid);
  const { name, ratio } = setting;
  const root = new TraceIdRatioBasedSampler(ratio);
  return new CallerTrustSampler(name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root, ratio);
}

class CallerTrustSampler implements Sampler {
  constructor(
    readonly configured: Sampler,
    readonly ratio: number,
  ) {}

  shouldSample(
    context: Context,
    traceId: string,
    name: string,
    kind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    // A SERVER span whose decision was taken before the SDK's startSpan (server-spans.ts).
    const decided = decidedIn(context);
    if (decided !== undefined) return decided;
    if (context.getValue(UNTRUSTED_PARENT) === true)
      return {
        decision:
          this.ratio > 0 && Math.random() < this.ratio
            ? SamplingDecision.RECORD_AND_SAMPLED
            : SamplingDecision.NOT_RECORD,
      };
    return this.configured.shouldSample(context, traceId, name, kind, attributes, links);
  }

  toString(): string {
    return `CallerTrust{${this.configured.toString()}}`;
  }
}

/**
 * Starts tracing when the environment asks for it (the SDK reads the OTEL_* variables from
 * process.env); undefined when it does not. Throws with one line when the protocol or the sampler
 * is not one served. Call once, before the app is built.
 */
export function startTracing(env: Env = process.env, version = 'unknown'): Tracing | undefined {
  if (!tracingRequested(env)) return undefined;
  const protocol = otlpProtocol(env);
  if (typeof protocol !== 'string') throw new Error(protocol.invalid);
  const setting = samplerSetting(env);
  if ('invalid' in setting) throw new Error(setting.invalid);
  const resource = resourceFromAttributes({ 'service.name': 'resource-api', 'service.version': version }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const exporter = protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter();
  const sampler = samplerFromEnv(env);
  const ids = new PooledIdGenerator();
  const provider = new NodeTracerProvider({
    resource,
    sampler,
    idGenerator: ids,
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  // No context manager: OpenTelemetry's default one rides on AsyncLocalStorage, which on Node 20
  // and 22 makes every promise of the process dearer once entered; spans travel with the
  // request and its database handle instead (db-spans.ts).
  provider.register({ propagator: new W3CTraceContextPropagator(), contextManager: null });
  active = provider.getTracer('resource-api', version);
  serverSpans = new ServerSpans(active, sampler, ids);
  let closing = false;
  return {
    flush: () => provider.forceFlush(),
    shutdown: async () => {
      active = undefined;
      serverSpans = undefined;
      // The diagnostics stay on through the final flush: a last export that fails is told.
      // (A failed final export rejects the SDK's shutdown instead of reaching its diagnostics.)
      closing = true;
      try {
        await provider.shutdown();
      } catch (error) {
        diag.error('the last spans could not be exported:', error);
      } finally {
        diag.disable();
      }
    },
    logTo(warn) {
      let last = Number.NEGATIVE_INFINITY;
      let suppressed = 0;
      const line = (message: string, ...args: unknown[]): void => {
        const now = performance.now();
        // While shutting down, every line: nothing comes after them to tell of those left out.
        if (!closing && now - last < EXPORT_LOG_EVERY_MS) {
          suppressed++;
          return;
        }
        last = now;
        const detail = args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ');
        warn({ suppressed }, `tracing: ${message}${detail === '' ? '' : ` ${detail}`}`);
        suppressed = 0;
      };
      const none = (): void => {};
      diag.setLogger({ error: line, warn: line, info: none, debug: none, verbose: none }, DiagLogLevel.WARN);
    },
  };
}

/** `traceparent` (and `tracestate`) of a context's span, as W3C Trace Context carries them. */
export function carrierOf(ctx: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The `traceparent` of a sampled span: what an event keeps (outbox); null otherwise. */
export function traceparentOf(span: Span | undefined): string | null {
  if (active === undefined || span === undefined || (span.spanContext().traceFlags & 1) === 0) return null;
  return carrierOf(trace.setSpan(ROOT_CONTEXT, span)).traceparent ?? null;
}

export function logFieldsOf(span: Span): Record<string, string> {
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** Where http-spans.ts keeps a request's SERVER span. */
export const kSpan = Symbol('tracing.span');

/** The log fields of a request's SERVER span (its access line, its logger's lines); none while tracing is off. */
export function requestLogFields(request: object): Record<string, string> | undefined {
  const span = (request as { [kSpan]?: Span })[kSpan];
  return span === undefined ? undefined : logFieldsOf(span);
}
