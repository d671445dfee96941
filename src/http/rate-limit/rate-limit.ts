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
import { Counter } from 'prom-client';
import { TooManyRequests } from '../../errors.js';
import { isPublicPath } from '../auth/auth.js';
import { requestPath } from '../request-url.js';
import { MemoryStore } from './memory-store.js';
import { RedisStore } from './redis-store.js';
import { WINDOW_MS, type RateLimitStore } from './store.js';

const WINDOW_SECONDS = WINDOW_MS / 1000;

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
