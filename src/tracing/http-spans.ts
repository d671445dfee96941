// The SERVER span of each request (docs/tracing.md), registered only while tracing is on. An
// incoming `traceparent`/`tracestate` continues the caller's trace. The span is named
// `<METHOD> <route>` (the route as declared, `/api/v1/users/:id`), carries the stable HTTP
// semantic conventions, and is an error only for a 5xx: a 404 or a 422 is the API working.
// What the request runs finds its span on the request, not in an async context: its database
// handle (`request.db`, through requestDb) traces its statements beneath it, and its logger
// writes the trace's ids (http/request-context.ts).
import type { IncomingHttpHeaders } from 'node:http';
import { propagation, ROOT_CONTEXT, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { routeOptionsOf, traceRequestLog } from '../http/request-context.js';
import { tracedDb } from './db-spans.js';
import { kSpan, serverSpanStarter, UNTRUSTED_PARENT } from './tracing.js';

type WithSpan = FastifyRequest & { [kSpan]?: Span };

const headerGetter = {
  keys: (carrier: IncomingHttpHeaders) => Object.keys(carrier),
  get: (carrier: IncomingHttpHeaders, key: string) => carrier[key],
};

async function httpSpans(app: FastifyInstance): Promise<void> {
  const spans = serverSpanStarter();
  if (spans === undefined) return;
  app.decorateRequest(kSpan, undefined);
  app.decorateRequest(kDb, undefined);

  app.addHook('onRequest', (request, _reply, done) => {
    let parent = propagation.extract(ROOT_CONTEXT, request.headers, headerGetter);
    // A caller's sampled flag counts only through a trusted proxy (TRUST_PROXY: the operator's own
    // edge, which decided), seen as a client address other than the socket's peer. From anyone
    // else the trace id is continued and the service's own ratio decides (tracing.ts).
    if (trace.getSpanContext(parent) !== undefined && request.ip === request.socket.remoteAddress)
      parent = parent.setValue(UNTRUSTED_PARENT, true);
    const route = routeOptionsOf(request).url;
    const question = request.url.indexOf('?');
    // Decided first: a request left out skips the SDK's startSpan (server-spans.ts).
    const span = spans.start(route === undefined ? request.method : `${request.method} ${route}`, parent);
    (request as WithSpan)[kSpan] = span;
    traceRequestLog(request); // its log lines name its ids
    // Not sampled (most requests, at a ratio): no attributes. Its log lines still name its ids;
    // its statements and events, like it, are not recorded.
    if (!span.isRecording()) return done();
    span.setAttributes({
      'http.request.method': request.method,
      'url.path': question === -1 ? request.url : request.url.slice(0, question),
      'url.scheme': request.protocol,
      ...(route === undefined ? {} : { 'http.route': route }),
      'client.address': request.ip,
      'network.protocol.version': request.raw.httpVersion,
      ...(request.headers['user-agent'] === undefined ? {} : { 'user_agent.original': request.headers['user-agent'] }),
    });
    done();
  });

  const end = (request: FastifyRequest, status: number | undefined) => {
    // Kept on the request once ended: the access line, written later, names its ids.
    const span = (request as WithSpan)[kSpan];
    if (span === undefined || !span.isRecording()) return;
    if (status !== undefined) {
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute('error.type', String(status));
      }
    }
    span.end();
  };
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode);
    done();
  });
  // A client that went away before the answer: the span ends without a status.
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined);
    done();
  });
}

type Handle = Parameters<typeof tracedDb>[0];

const kDb = Symbol('tracing.db');

/** `db` for `request`: traced beneath its SERVER span when that span is sampled. */
export function requestDb<T extends Handle>(request: FastifyRequest, db: T): T {
  const span = (request as WithSpan)[kSpan];
  if (span === undefined || !span.isRecording()) return db;
  // A request reads `request.db` several times: the handle made for it, while its base is the same.
  const made = (request as { [kDb]?: [Handle, Handle] })[kDb];
  if (made?.[0] === db) return made[1] as T;
  const handle = tracedDb(db, span);
  (request as { [kDb]?: [Handle, Handle] })[kDb] = [db, handle];
  return handle;
}

export default fp(httpSpans, { name: 'tracing-http-spans' });
