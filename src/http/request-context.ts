// Per-request plumbing: the request id (X-Request-Id in, or a new one; echoed back), one log
// line per request, and the headers every response carries (docs/api-guide.md#errors).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';
import fp from 'fastify-plugin';
import { requestLogFields } from '../tracing/tracing.js';

const kRouteOptions = Symbol('routeOptions');

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A health probe: its request line is logged at debug, not info. */
    probe?: boolean;
  }
  interface FastifyRequest {
    [kRouteOptions]: FastifyRequest['routeOptions'] | null;
  }
}

/**
 * `request.routeOptions`, read once per request. Fastify 5 builds it afresh at every read (an
 * object of twelve members and a lookup of the router's constraint strategies), and the hooks
 * every request passes read it five times: content negotiation twice, auth, the log line and the
 * metrics. Its members do not change once the request is routed.
 */
export function routeOptionsOf(request: FastifyRequest): FastifyRequest['routeOptions'] {
  return (request[kRouteOptions] ??= request.routeOptions);
}

// A caller's id is kept only if it is short and plain, so it cannot forge log lines.
const SAFE_ID = /^[\w.:@/+=-]{1,128}$/;

export function genReqId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
}

/** The log field that carries the request id (app.ts gives Fastify the same label). */
export const REQUEST_ID_LOG_LABEL = 'requestId';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** pino's own check; a logger without one is asked to write and decides itself. */
function isLevelEnabled(logger: FastifyBaseLogger, level: Level): boolean {
  return (logger as Partial<Pick<Logger, 'isLevelEnabled'>>).isLevelEnabled?.(level) ?? true;
}

/**
 * Makes `request`'s log lines carry the ids of its span (requestLogFields): every line its
 * logger writes from now on. A logger made otherwise (a route's own level) is left as it is.
 */
export function traceRequestLog(request: FastifyRequest): void {
  if (request.log instanceof RequestLogger) request.log.traced = request;
}

/**
 * A request's logger, made into pino's child (its bindings serialized) only when a line is
 * written at an enabled level. Most requests write none through it (their one line goes out
 * through the app's logger, below), so a child per request was garbage on the hot path.
 */
class RequestLogger {
  #child: FastifyBaseLogger | undefined;
  /** The request whose span's ids its lines carry (set by tracing/http-spans.ts while tracing is on). */
  traced: object | undefined = undefined;
  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}
  #real(): FastifyBaseLogger {
    if (this.#child !== undefined) return this.#child;
    const fields = this.traced === undefined ? undefined : requestLogFields(this.traced);
    return (this.#child = this.parent.child(
      fields === undefined ? this.bindings : { ...this.bindings, ...fields },
      this.options,
    ));
  }
  #write(level: Level, args: unknown[]): void {
    if (!isLevelEnabled(this.#child ?? this.parent, level)) return;
    (this.#real() as unknown as Record<Level, (...a: unknown[]) => void>)[level](...args);
  }
  get level(): string {
    return (this.#child ?? this.parent).level;
  }
  set level(level: string) {
    this.#real().level = level;
  }
  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#write('error', args);
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }
  info(...args: unknown[]): void {
    this.#write('info', args);
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }
  silent(): void {}
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options);
  }
}

async function requestContext(app: FastifyInstance): Promise<void> {
  app.decorateRequest(kRouteOptions, null);

  // A route or plugin with its own log level or serializers gets pino's child at once.
  app.setChildLoggerFactory((logger, bindings, options) =>
    options.level === undefined && options.serializers === undefined
      ? new RequestLogger(logger, bindings, options)
      : logger.child(bindings, options),
  );

  // Once shutdown starts, each response closes its connection, so that a request in flight at
  // SIGTERM does not leave a keep-alive socket holding the process for its idle timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  // Hooks on every request are callback-style: an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    const level = routeOptionsOf(request).config.probe === true ? 'debug' : 'info';
    if (!isLevelEnabled(app.log, level)) return done();
    const line = {
      [REQUEST_ID_LOG_LABEL]: request.id,
      method: request.method,
      url: request.originalUrl,
      statusCode: reply.statusCode,
      responseTime: Math.round(reply.elapsedTime * 100) / 100,
      ...requestLogFields(request), // trace_id and span_id while tracing is on
    };
    // Written through the app's logger with the id in the line (the fields a child's line
    // has), so that no child logger is made for it. Health probes arrive every few seconds
    // from every load balancer: logged at debug only.
    app.log[level](line, 'request completed');
    done();
  });
}

export default fp(requestContext, { name: 'request-context' });
