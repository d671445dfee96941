// Admission (docs/operations.md#overload): before Fastify sees a request, it starts while the
// requests executing are under the adaptive limit (limiter.ts); over it, it waits in the admission
// queue (admission-queue.ts), which starts it when a place frees, or refuses it once it could no
// longer be answered within the latency budget: a 503 problem `…/problems/overloaded` with a
// jittered Retry-After, written in node:http's own listener: no routing, no token check, no body
// read, no database work.
//
// Never refused nor counted: the health probes (an orchestrator must hear the instance however
// loaded it is), open event streams (long-lived, with a cap of their own), and the metrics port
// (a listener of its own). A request whose client hung up before it started is not started. The
// event-loop backstop (@fastify/under-pressure, overload.ts) refuses the same way.
//
// A request's service time, which steers the limit and readiness, runs from the moment it is
// complete (its body read, for a request that has one) to its answer: a client that sends its
// body slowly spends its own time, and steers neither.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance as perfHooks } from 'node:perf_hooks';
import { CorsRules } from '../cors.js';
import { OVERLOADED_DETAIL, overloadRetryAfter } from '../problems/error-registry.js';
import { PROBLEM_TYPES } from '../problems/problem-types.js';
import { AdmissionQueue, type Waiting } from './admission-queue.js';
import { ConcurrencyLimiter } from './limiter.js';
import { RequestAges } from './request-ages.js';

export type ShedReason = 'limit' | 'queue' | 'event_loop';

export interface AdmissionOptions {
  /** OVERLOAD_PROTECTION: false admits everything at once (still counted in flight). */
  enabled: boolean;
  minLimit: number;
  maxLimit: number;
  /** LATENCY_BUDGET_MS: what the instance answers within, or refuses. */
  budgetMs: number;
  /** ERROR_TYPE_BASE: problem types are `${base}/overloaded`. */
  errorTypeBase: string;
  cors: CorsRules;
  /** Told of every request shed (metrics, the rate-limited warning). */
  onShed?: (reason: ShedReason) => void;
  /** How busy the event loop was since the last reading (0–1): its utilization, by default. */
  loopBusy?: () => number;
}

/** Paths never refused nor counted: the health probes, and the event stream. */
export function isExempt(method: string | undefined, url: string): boolean {
  if (url.startsWith('/api/public/health')) return true;
  // (The pattern only where it can match: this runs for every request.)
  return method === 'GET' && url.includes('/events') && /^\/api\/(?:v\d+\/)?events(?:[/?]|$)/.test(url);
}

/** Whether a request has a body to read (by its headers; a GET may have one too). */
const hasBody = (req: IncomingMessage): boolean => {
  const length = req.headers['content-length'];
  return length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
};

/** A request, from its arrival to its answer. */
interface Entry extends Waiting {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  started: boolean;
  answered: boolean;
  /** When it was complete and started (ms), -1 before. */
  completeAt: number;
  /** Its readiness slice, -1 before it is complete. */
  slice: number;
}

/**
 * The limit steers the p99 of the service time to this share of the budget (while the mean is at
 * least half the p99: limiter.ts).
 */
const TARGET_SHARE = 0.4;

export class Admission {
  readonly limiter: ConcurrencyLimiter;
  readonly queue: AdmissionQueue<Entry>;
  readonly enabled: boolean;
  /** Requests started and not yet answered, whether or not the limit applies (http_requests_in_flight). */
  get inflight(): number {
    return this.limiter.inflight;
  }

  readonly #prefix: string;
  readonly #cors: CorsRules;
  readonly #onShed: (reason: ShedReason) => void;
  readonly #ages = new RequestAges();
  /** The event loop's utilization as the queue last read it. */
  #utilization = perfHooks.eventLoopUtilization();
  #handler: (req: IncomingMessage, res: ServerResponse) => void = () => {};
  /**
   * Whether the event loop lags past its limit (the backstop, overload.ts): set once the app is
   * ready. Checked first, so that while the process is behind, what waits in its sockets is
   * refused at a fraction of the cost of serving it, until the loop has caught up.
   */
  lagging: () => boolean = () => false;
  /**
   * Told of each request refused here, before routing (its method, and the seconds from its
   * arrival to its refusal): the metrics plugin counts it among the answers (http_requests_total,
   * route `unrouted`), so that the availability objective sees every answer of the port
   * (docs/operations.md#metrics).
   */
  refused: (method: string, seconds: number) => void = () => {};

  constructor(options: AdmissionOptions) {
    this.enabled = options.enabled;
    this.limiter = new ConcurrencyLimiter({
      min: options.minLimit,
      max: options.maxLimit,
      targetMs: TARGET_SHARE * options.budgetMs,
    });
    this.queue = new AdmissionQueue<Entry>(
      {
        budgetMs: options.budgetMs,
        serviceMs: () => this.limiter.p99,
        busy:
          options.loopBusy ??
          (() => {
            const now = perfHooks.eventLoopUtilization();
            const step = perfHooks.eventLoopUtilization(now, this.#utilization);
            this.#utilization = now;
            return step.utilization;
          }),
      },
      (entry) => this.#refuseUnrouted(entry.req, entry.res, 'limit', entry.at),
      () => this.#startWaiting(performance.now()),
    );
    const { title, status } = PROBLEM_TYPES.overloaded;
    this.#prefix = `{"type":${JSON.stringify(`${options.errorTypeBase}/overloaded`)},"title":${JSON.stringify(title)},"status":${status},"detail":${JSON.stringify(OVERLOADED_DETAIL)},"instance":`;
    this.#cors = options.cors;
    this.#onShed = options.onShed ?? (() => {});
  }

  /** How long the oldest request in flight has been (ms; 0 when none; readiness). */
  oldestMs(now = performance.now()): number {
    return this.#ages.oldestMs(now);
  }

  /** Fastify's request listener, behind admission. */
  wrap(
    handler: (req: IncomingMessage, res: ServerResponse) => void,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    this.#handler = handler;
    const limiter = this.limiter;
    return (req, res) => {
      const url = req.url ?? '/';
      if (isExempt(req.method, url)) return handler(req, res);
      // The client hung up while the request waited to be read: nothing to answer.
      if (req.socket.destroyed) return;
      if (this.enabled && this.lagging()) return this.#refuseUnrouted(req, res, 'event_loop', performance.now());
      const now = performance.now();
      const entry: Entry = {
        at: now,
        out: false,
        req,
        res,
        started: false,
        answered: false,
        completeAt: -1,
        slice: -1,
      };
      res.once('close', () => this.#closed(entry));
      if (!this.enabled) {
        limiter.acquire();
        return this.#start(entry, now);
      }
      if (this.queue.length === 0 && limiter.tryAcquire()) {
        this.queue.passed();
        return this.#start(entry, now);
      }
      limiter.bind();
      if (!this.queue.push(entry)) {
        this.queue.overflowed(now);
        entry.out = true;
        this.#refuseUnrouted(req, res, 'limit', now);
      }
    };
  }

  #start(entry: Entry, now: number): void {
    entry.started = true;
    if (hasBody(entry.req))
      entry.req.once('end', () => {
        if (!entry.answered) this.#complete(entry, performance.now());
      });
    else this.#complete(entry, now);
    this.#handler(entry.req, entry.res);
  }

  #complete(entry: Entry, now: number): void {
    entry.completeAt = now;
    entry.slice = this.#ages.add(now);
  }

  #closed(entry: Entry): void {
    const now = performance.now();
    if (!entry.started) return this.queue.drop(entry);
    entry.answered = true;
    if (entry.slice >= 0) this.#ages.remove(entry.slice);
    this.limiter.release(entry.completeAt >= 0 ? now - entry.completeAt : undefined, now);
    if (this.queue.length > 0) this.#startWaiting(now);
  }

  /** Starts what waits, while there is room; refuses what waited too long. */
  #startWaiting(now: number): void {
    const limiter = this.limiter;
    while (this.queue.length > 0 && limiter.inflight < limiter.limit) {
      const entry = this.queue.take(now);
      if (entry === undefined) return;
      limiter.acquire();
      this.#start(entry, now);
    }
    this.queue.expire(now);
  }

  /**
   * A refusal before Fastify (at once, or after waiting in the queue since `since`): no hook of
   * Fastify's sees it, so it is counted here, with the time it waited.
   */
  #refuseUnrouted(req: IncomingMessage, res: ServerResponse, reason: ShedReason, since: number): void {
    this.refuse(req, res, reason);
    this.refused(req.method ?? 'GET', (performance.now() - since) / 1000);
  }

  /**
   * The 503 of an overloaded instance, written at once, with the CORS headers of any answer on
   * its path; the request's body is left unread, so its connection closes after the answer.
   */
  refuse(req: IncomingMessage, res: ServerResponse, reason: ShedReason): void {
    this.#onShed(reason);
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const body = `${this.#prefix}${JSON.stringify(path)}}`;
    const headers: Record<string, string | number> = {
      'content-type': 'application/problem+json',
      'content-length': Buffer.byteLength(body),
      'retry-after': overloadRetryAfter(),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    };
    if (hasBody(req) && !req.complete) headers.connection = 'close';
    const policy = this.#cors.policyFor(path);
    if (policy !== undefined) {
      headers.vary = 'Origin';
      CorsRules.simpleHeaders(policy, req.method ?? 'GET', req.headers.origin, (name, value) => {
        headers[name] = value;
      });
    }
    res.writeHead(503, headers);
    res.end(body);
  }

  /** Stops the queue's timer (the app is closing). */
  close(): void {
    this.queue.stop();
  }
}
