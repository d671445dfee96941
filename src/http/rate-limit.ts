// Rate limits (docs/api-guide.md#rate-limits, OWASP API4): a quota per minute per authenticated caller (`sub`)
// and per client address for anonymous requests (public paths, and 401s, which slows token
// guessing). Health probes and CORS preflights are not counted. Every counted response carries
// the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers, structured fields):
//   RateLimit-Policy: "default";q=600;w=60
//   RateLimit: "default";r=<remaining>;t=<seconds until the window resets>
// Over quota: 429 problem with Retry-After.
//
// Written here rather than with @fastify/rate-limit: that plugin writes the older
// X-RateLimit-* / RateLimit-Limit fields, not the structured RateLimit and RateLimit-Policy
// of the current draft, keys one request one way (it cannot count a 401 by address and an
// authenticated call by caller), and runs before authentication unless moved to a later hook,
// where a 401 never reaches it.
//
// Windows are fixed minutes of the wall clock, so every instance agrees on them. Counters live
// in the process, or in Redis (REDIS_URL) with one atomic round trip per request, so any number
// of instances share one quota. When Redis cannot answer, requests are served (fail open),
// uncounted: a warning at most once a minute, and a metric counts the misses.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import { Counter } from 'prom-client';
import { TooManyRequests } from '../errors.js';
import { isPublicPath } from './auth.js';
import { requestPath } from './request-url.js';

const WINDOW_MS = 60_000;
const WINDOW_SECONDS = WINDOW_MS / 1000;

/** A counter store: adds one hit to `key` in the window and returns the count so far. */
export interface RateLimitStore {
  hit(key: string, window: number): number | Promise<number>;
  close(): Promise<void>;
}

/** In the process: one count per key for the current window; older windows are dropped. */
export class MemoryStore implements RateLimitStore {
  #window = -1;
  #counts = new Map<string, number>();

  hit(key: string, window: number): number {
    if (window !== this.#window) {
      this.#window = window;
      this.#counts = new Map();
    }
    const count = (this.#counts.get(key) ?? 0) + 1;
    this.#counts.set(key, count);
    return count;
  }

  async close(): Promise<void> {}
}

type RateLimitRedis = Redis & { rateLimitHits(...keysThenTtl: (string | number)[]): Promise<number[]> };

/** The most hits one Redis script call carries. */
export const MAX_HITS_PER_CALL = 1000;

/** A hit waiting for the next batch: its key, and what to do with its count. */
interface PendingHit {
  key: string;
  resolve: (count: number) => void;
  reject: (error: unknown) => void;
}

/**
 * In Redis: INCR and a first-hit PEXPIRE in one script, one round trip. The hits of one turn of
 * the event loop (the requests whose bytes arrived together) go to Redis as one script call with
 * every key, which increments each in order and answers each count: per hit, the same count as
 * one call each (a key named twice counts twice), for one command's cost per batch instead of
 * one per request.
 */
export class RedisStore implements RateLimitStore {
  readonly #redis: RateLimitRedis;
  #batch: PendingHit[] = [];

  constructor(url: string) {
    const redis = new Redis(url, {
      lazyConnect: false,
      enableAutoPipelining: true, // commands of the same tick share one write
      enableOfflineQueue: false, // not connected: fail at once (fail open), never queue
      maxRetriesPerRequest: 0,
      commandTimeout: 500,
      connectTimeout: 2000,
      retryStrategy: (attempt) => Math.min(200 * attempt, 2000), // keep reconnecting
    });
    redis.on('error', () => {}); // reported through hit() failures, not as process errors
    redis.defineCommand('rateLimitHits', {
      lua: `local ttl = ARGV[1]
local counts = {}
for i, key in ipairs(KEYS) do
  local c = redis.call('INCR', key)
  if c == 1 then redis.call('PEXPIRE', key, ttl) end
  counts[i] = c
end
return counts`,
    });
    this.#redis = redis as RateLimitRedis;
  }

  /** Waits up to `ms` for the first connection; never fails (a Redis that is down means fail open). */
  async connected(ms: number): Promise<void> {
    if (this.#redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#redis.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  hit(key: string, window: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      if (this.#batch.length === 0) setImmediate(this.#send);
      this.#batch.push({ key: `resource-api:rl:${window}:${key}`, resolve, reject });
    });
  }

  /**
   * Sends the batch gathered during this turn of the event loop, in calls of at most
   * MAX_HITS_PER_CALL keys (in order, on one connection), so that no burst makes one call that
   * holds Redis, or a spread of arguments, without bound.
   */
  readonly #send = (): void => {
    const batch = this.#batch;
    this.#batch = [];
    for (let start = 0; start < batch.length; start += MAX_HITS_PER_CALL) {
      const part = batch.slice(start, start + MAX_HITS_PER_CALL);
      // The key count goes first (a script defined without numberOfKeys takes it in the call).
      this.#redis.rateLimitHits(part.length, ...part.map((h) => h.key), WINDOW_MS * 2).then(
        (counts) => part.forEach((h, i) => h.resolve(Number(counts[i]))),
        (error: unknown) => part.forEach((h) => h.reject(error)),
      );
    }
  };

  async close(): Promise<void> {
    this.#redis.disconnect();
  }
}

interface Decision {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Counts an anonymous request (a 401): the 429 error when its address is over quota. */
    rateLimitAnonymous?: (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;
  }
}

function isHealthProbe(path: string): boolean {
  return path.startsWith('/api/public/health/');
}

async function rateLimit(app: FastifyInstance, { now = Date.now }: { now?: () => number }): Promise<void> {
  const { perMinute, anonymousPerMinute, redisUrl } = app.config.rateLimit;
  if (perMinute === 0 && anonymousPerMinute === 0) return;

  let store: RateLimitStore = new MemoryStore();
  if (redisUrl !== undefined) {
    const redis = new RedisStore(redisUrl);
    await redis.connected(2000);
    store = redis;
  }
  app.addHook('onClose', async () => store.close());
  const misses = new Counter({
    name: 'rate_limit_store_errors_total',
    help: 'Requests served uncounted because the rate-limit store did not answer',
    registers: [app.metrics],
  });
  let lastWarning = -Infinity;
  const storeFailed = (request: FastifyRequest, error: unknown) => {
    misses.inc();
    if (now() - lastWarning < WINDOW_MS) return;
    lastWarning = now();
    request.log.warn({ err: error }, 'rate-limit store unavailable: requests are served uncounted (fail open)');
  };

  const policy = (limit: number) => `"default";q=${limit};w=${WINDOW_SECONDS}`;
  const policies = new Map<number, string>([
    [perMinute, policy(perMinute)],
    [anonymousPerMinute, policy(anonymousPerMinute)],
  ]);

  /** Counts one request against `key`; calls back with the 429 error when over quota. */
  const count = (
    request: FastifyRequest,
    reply: FastifyReply,
    key: string,
    limit: number,
    done: (error?: Error) => void,
  ): void => {
    const at = now();
    const window = Math.floor(at / WINDOW_MS);
    const decide = (hits: number): void => {
      const d: Decision = {
        limit,
        remaining: Math.max(0, limit - hits),
        resetSeconds: Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - at) / 1000)),
      };
      reply.header('ratelimit-policy', policies.get(limit) ?? policy(limit));
      reply.header('ratelimit', `"default";r=${d.remaining};t=${d.resetSeconds}`);
      done(hits > limit ? new TooManyRequests(limit, d.resetSeconds) : undefined);
    };
    let result: number | Promise<number>;
    try {
      result = store.hit(key, window);
    } catch (error) {
      storeFailed(request, error);
      return done();
    }
    if (typeof result === 'number') return decide(result);
    result.then(decide, (error: unknown) => {
      storeFailed(request, error);
      done();
    });
  };

  const anonymous = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void => {
    if (anonymousPerMinute === 0) return done();
    count(request, reply, `ip:${request.ip}`, anonymousPerMinute, done);
  };
  app.decorate('rateLimitAnonymous', anonymous);

  // After authentication: the caller is known, or the path is public.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'OPTIONS') return done(); // preflights and Allow probes
    const path = requestPath(request);
    if (isPublicPath(path)) return isHealthProbe(path) ? done() : anonymous(request, reply, done);
    if (perMinute === 0) return done();
    count(request, reply, `sub:${request.principal.subject}`, perMinute, done);
  });
}

export default fp(rateLimit, { name: 'rate-limit', dependencies: ['auth', 'metrics'] });
