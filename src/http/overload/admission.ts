// Admission (docs/operations.md#overload): before Fastify sees a request, it is admitted while
// the requests in flight are under the adaptive limit (limiter.ts), or refused at once with a 503
// problem `…/problems/overloaded` and a jittered Retry-After: no routing, no token check, no
// body read, no database work. The refusal is written in node:http's own listener, so that it
// costs the instance a small fraction of what the request would have.
//
// Never refused: the health probes (an orchestrator must hear the instance however loaded it
// is), open event streams (long-lived, with a cap of their own; they are not counted either), and
// the metrics port (a listener of its own). A request whose client hung up before it was started
// is not started. The event-loop backstop (@fastify/under-pressure, overload.ts) refuses the
// same way, from Fastify's first hook.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EXPOSED_HEADERS, originMatcher } from '../cors.js';
import { OVERLOADED_DETAIL, overloadRetryAfter } from '../problems/error-registry.js';
import { PROBLEM_TYPES } from '../problems/problem-types.js';
import { ConcurrencyLimiter } from './limiter.js';

export type ShedReason = 'limit' | 'queue' | 'event_loop';

export interface AdmissionOptions {
  /** OVERLOAD_PROTECTION: false admits everything (still counted in flight). */
  enabled: boolean;
  minLimit: number;
  maxLimit: number;
  /** ERROR_TYPE_BASE: problem types are `${base}/overloaded`. */
  errorTypeBase: string;
  corsAllowedOrigins: readonly string[];
  /** Told of every request shed (metrics, the rate-limited warning). */
  onShed?: (reason: ShedReason) => void;
}

/** Paths never refused nor counted: the health probes, and the event stream. */
export function isExempt(method: string | undefined, url: string): boolean {
  if (url.startsWith('/api/public/health')) return true;
  // (The pattern only where it can match: this runs for every request.)
  return method === 'GET' && url.includes('/events') && /^\/api\/(?:v\d+\/)?events(?:[/?]|$)/.test(url);
}

export class Admission {
  readonly limiter: ConcurrencyLimiter;
  readonly enabled: boolean;
  /** Requests in flight, whether or not the limit applies (http_requests_in_flight). */
  get inflight(): number {
    return this.limiter.inflight;
  }

  readonly #prefix: string;
  readonly #allowsOrigin: (origin: string) => boolean;
  readonly #exposed: string;
  readonly #onShed: (reason: ShedReason) => void;
  readonly #ages = new Ages();
  /**
   * Whether the event loop lags past its limit (the backstop, overload.ts): set once the app is
   * ready. Checked before the limit, so that while the process is behind, what waits in its
   * sockets is refused at a fraction of the cost of serving it, until the loop has caught up.
   */
  lagging: () => boolean = () => false;

  constructor(options: AdmissionOptions) {
    this.enabled = options.enabled;
    this.limiter = new ConcurrencyLimiter({ min: options.minLimit, max: options.maxLimit });
    const { title, status } = PROBLEM_TYPES.overloaded;
    this.#prefix = `{"type":${JSON.stringify(`${options.errorTypeBase}/overloaded`)},"title":${JSON.stringify(title)},"status":${status},"detail":${JSON.stringify(OVERLOADED_DETAIL)},"instance":`;
    this.#allowsOrigin = originMatcher(options.corsAllowedOrigins);
    this.#exposed = EXPOSED_HEADERS.join(', ');
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
    const limiter = this.limiter;
    return (req, res) => {
      const url = req.url ?? '/';
      if (isExempt(req.method, url)) return handler(req, res);
      // The client hung up while the request waited to be read: nothing to answer.
      if (req.socket.destroyed) return;
      if (this.enabled && this.lagging()) return this.refuse(req, res, 'event_loop');
      if (!limiter.tryAcquire()) {
        if (this.enabled) return this.refuse(req, res, 'limit');
        limiter.inflight++;
      }
      const admitted = performance.now();
      const bucket = this.#ages.add(admitted);
      res.once('close', () => {
        const now = performance.now();
        this.#ages.remove(bucket);
        limiter.release(now - admitted, now);
      });
      handler(req, res);
    };
  }

  /** The 503 of an overloaded instance, written at once; the request's body is left unread. */
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
    const origin = req.headers.origin;
    if (origin !== undefined && this.#allowsOrigin(origin)) {
      headers['access-control-allow-origin'] = origin;
      headers['access-control-allow-credentials'] = 'true';
      headers['access-control-expose-headers'] = this.#exposed;
      headers.vary = 'Origin';
    }
    res.writeHead(503, headers);
    res.end(body);
  }
}

const BUCKET_MS = 100;
const BUCKETS = 64;

/**
 * The requests in flight, counted by the 100-ms slice in which each was admitted: a few array
 * writes a request, and the age of the oldest (readiness) by a scan of 64 slices. A request
 * older than the 6.4 s the slices span is counted apart, as older than all of them.
 */
class Ages {
  readonly #counts = new Int32Array(BUCKETS);
  readonly #slices = new Float64Array(BUCKETS).fill(-1);
  #older = 0;

  /** Counts a request admitted at `now`; gives the slice to remove it from. */
  add(now: number): number {
    const slice = Math.floor(now / BUCKET_MS);
    const i = slice % BUCKETS;
    if (this.#slices[i] !== slice) {
      this.#older += this.#counts[i] as number;
      this.#counts[i] = 0;
      this.#slices[i] = slice;
    }
    (this.#counts[i] as number)++;
    return slice;
  }

  remove(slice: number): void {
    const i = slice % BUCKETS;
    if (this.#slices[i] === slice) (this.#counts[i] as number)--;
    else this.#older--;
  }

  oldestMs(now: number): number {
    if (this.#older > 0) return BUCKET_MS * BUCKETS;
    let oldest = Number.POSITIVE_INFINITY;
    for (let i = 0; i < BUCKETS; i++) {
      const slice = this.#slices[i] as number;
      if ((this.#counts[i] as number) > 0 && slice < oldest) oldest = slice;
    }
    return oldest === Number.POSITIVE_INFINITY ? 0 : Math.max(0, now - oldest * BUCKET_MS);
  }
}
