// The start of a request's SERVER span (http-spans.ts), with the sampling decision taken first.
// Most requests are left out at a ratio, and for those the SDK's `startSpan` does more than the
// answer needs: it checks for suppressed tracing, copies links and attributes, counts the span
// for its own metrics and logs at debug before it wraps the span's context. Here a request left
// out gets what the SDK would give it (a non-recording span with a fresh span id, the trace id
// continued or new, the flags `00`) for the sampler's decision and the two ids alone. A request
// that is sampled goes through the SDK's `startSpan` as before, with the trace id already drawn
// (ids.ts, `withTraceId`) and the decision already taken (DECIDED, read by the service's
// sampler, tracing.ts), so that the SDK neither draws another id nor decides again: a random
// draw (an untrusted caller's parent) would otherwise be made twice.
import {
  createContextKey,
  isSpanContextValid,
  SpanKind,
  trace,
  TraceFlags,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { SamplingDecision, type Sampler, type SamplingResult } from '@opentelemetry/sdk-trace-node';
import type { PooledIdGenerator } from './ids.js';

/** A context's sampling result, taken before the SDK's `startSpan` (ServerSpans): the sampler returns it. */
const DECIDED = createContextKey('resource-api: the sampling decision, taken');

/** The decision a context carries from ServerSpans, if any (for the service's sampler). */
export function decidedIn(context: Context): SamplingResult | undefined {
  return context.getValue(DECIDED) as SamplingResult | undefined;
}

const NO_ATTRIBUTES = Object.freeze({});
const NO_LINKS: never[] = [];

export class ServerSpans {
  constructor(
    readonly tracer: Tracer,
    readonly sampler: Sampler,
    readonly ids: PooledIdGenerator,
  ) {}

  /** The SERVER span `name` beneath `parent` (a caller's extracted trace context, or none). */
  start(name: string, parent: Context): Span {
    const parentSpan = trace.getSpanContext(parent);
    const continued = parentSpan !== undefined && isSpanContextValid(parentSpan);
    const traceId = continued ? parentSpan.traceId : this.ids.generateTraceId();
    const result = this.sampler.shouldSample(parent, traceId, name, SpanKind.SERVER, NO_ATTRIBUTES, NO_LINKS);
    if (result.decision === SamplingDecision.NOT_RECORD)
      return trace.wrapSpanContext({
        traceId,
        spanId: this.ids.generateSpanId(),
        traceFlags: TraceFlags.NONE,
        traceState: result.traceState ?? (continued ? parentSpan.traceState : undefined),
      });
    const decided = parent.setValue(DECIDED, result);
    return continued
      ? this.tracer.startSpan(name, { kind: SpanKind.SERVER }, decided)
      : this.ids.withTraceId(traceId, () => this.tracer.startSpan(name, { kind: SpanKind.SERVER }, decided));
  }
}
