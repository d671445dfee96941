// A webhook delivery attempt as a CLIENT span (docs/tracing.md): in the trace of the request
// that wrote the event (its `traceparent`, kept with the event), so that a receiver's own tracing
// links to the order or the user that caused it. Only when tracing is on and that request was
// sampled; the attempt then sends the span's `traceparent` to the receiver.
import { propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { carrierOf, tracer } from './tracing.js';

export interface DeliverySpan {
  /** `traceparent` (and `tracestate`) to send with the attempt. */
  headers: Record<string, string>;
  /** Ends the span with the receiver's answer, or the error that stood for one. */
  end(status: number | null, error: string | null): void;
}

export interface Attempted {
  id: number;
  subscription_id: number;
  attempts: number;
  url: string;
  event_id: string;
  event_type: string;
  subject: string;
  trace_context: string | null;
}

export function deliverySpan(d: Attempted): DeliverySpan | undefined {
  const t = tracer();
  if (t === undefined || d.trace_context === null) return undefined;
  const parent = propagation.extract(ROOT_CONTEXT, { traceparent: d.trace_context });
  const url = new URL(d.url);
  const span = t.startSpan(
    'POST',
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'http.request.method': 'POST',
        'url.full': `${url.origin}${url.pathname}`,
        'server.address': url.hostname,
        'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
        'http.request.resend_count': d.attempts - 1,
        'cloudevents.event_id': d.event_id,
        'cloudevents.event_type': d.event_type,
        'cloudevents.event_subject': d.subject,
        'webhook.subscription.id': d.subscription_id,
        'webhook.delivery.id': d.id,
      },
    },
    parent,
  );
  return {
    headers: carrierOf(trace.setSpan(parent, span)),
    end(status, error) {
      if (status !== null) span.setAttribute('http.response.status_code', status);
      if (status === null || status >= 400) {
        span.setStatus({ code: SpanStatusCode.ERROR, ...(error === null ? {} : { message: error }) });
        span.setAttribute('error.type', status === null ? 'delivery_failed' : String(status));
      }
      span.end();
    },
  };
}
