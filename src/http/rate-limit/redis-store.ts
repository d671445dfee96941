// The quotas' counters in Redis (REDIS_URL): every instance counts in one place, one round trip
// per turn of the event loop, so any number of instances share one quota.
import { Redis } from 'ioredis';
import { WINDOW_MS, type RateLimitStore } from './store.js';

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
