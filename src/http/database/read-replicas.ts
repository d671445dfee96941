// Reads from replicas, with read-your-writes (docs/operations.md "Running at scale").
//
// A GET whose route may read from a replica reads there (request.db) when a replica is up, lags
// at most REPLICA_MAX_LAG_MS, and has replayed the caller's last commit; otherwise from the
// primary. Each answered write of a caller records the primary's WAL position, before the answer
// leaves, so that the caller's next read, on any instance, sees it: the positions live in Redis
// with REDIS_URL (shared by every instance), else in the process. Writes, reads inside a write,
// public paths (readiness asks the primary) and routes marked `primaryOnly` (the event stream)
// use the primary. A replica that fails mid-request is asked no more: the statement runs again on
// the primary (db/create-database.ts), so a replica never causes a 5xx.
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { Redis } from 'ioredis';
import { Counter, Gauge } from 'prom-client';
import type { ReplicaSet } from '../../db/replicas.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Reads of this route never go to a replica (they must see every commit at once). */
    primaryOnly?: boolean;
  }
}

type Position = bigint | undefined | 'unknown';

/** Where each caller's last commit lies in the WAL. */
interface Positions {
  /**
   * undefined: the caller wrote nothing that a replica may lack; 'unknown': ask the primary. At
   * once when the answer is in the process (every read asks: no promise for it).
   */
  get(subject: string): Position | Promise<Position>;
  set(subject: string, position: bigint): Promise<void>;
  prune(replayedByAll: bigint): void;
  close(): Promise<void>;
}

/** In the process: what this instance's callers wrote, until every replica has replayed it. */
class MemoryPositions implements Positions {
  readonly #positions = new Map<string, bigint>();

  get(subject: string): bigint | undefined {
    return this.#positions.get(subject);
  }

  async set(subject: string, position: bigint): Promise<void> {
    const known = this.#positions.get(subject);
    if (known === undefined || position > known) this.#positions.set(subject, position);
  }

  prune(replayedByAll: bigint): void {
    for (const [subject, position] of this.#positions) if (position <= replayedByAll) this.#positions.delete(subject);
  }

  async close(): Promise<void> {}
}

type PositionsRedis = Redis & { walPositionMax(key: string, value: string, ttlMs: number): Promise<number> };

/** In Redis, shared by every instance. Redis not answering: the caller reads from the primary. */
class RedisPositions implements Positions {
  readonly #redis: PositionsRedis;
  readonly #local = new MemoryPositions();

  constructor(
    url: string,
    private readonly ttlMs: number,
  ) {
    const redis = new Redis(url, {
      enableAutoPipelining: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 500,
      connectTimeout: 2000,
      retryStrategy: (attempt) => Math.min(200 * attempt, 2000),
    });
    redis.on('error', () => {});
    // Positions are kept as 16 hex digits, so that strings order as positions do.
    redis.defineCommand('walPositionMax', {
      numberOfKeys: 1,
      lua: `local known = redis.call('GET', KEYS[1])
if (not known) or known < ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0`,
    });
    this.#redis = redis as PositionsRedis;
  }

  async get(subject: string): Promise<Position> {
    try {
      const value = await this.#redis.get(key(subject));
      const shared = value === null ? undefined : BigInt(`0x${value}`);
      const local = this.#local.get(subject);
      return local !== undefined && (shared === undefined || local > shared) ? local : shared;
    } catch {
      return 'unknown';
    }
  }

  async set(subject: string, position: bigint): Promise<void> {
    await this.#local.set(subject, position);
    await this.#redis.walPositionMax(key(subject), position.toString(16).padStart(16, '0'), this.ttlMs);
  }

  prune(replayedByAll: bigint): void {
    this.#local.prune(replayedByAll);
  }

  async close(): Promise<void> {
    this.#redis.disconnect();
  }
}

const key = (subject: string) => `resource-api:wal-position:${subject}`;
const READS = new Set(['GET', 'HEAD']);

async function readReplicas(app: FastifyInstance, { replicas }: { replicas: ReplicaSet }): Promise<void> {
  const { redisUrl } = app.config.rateLimit;
  const maxLagMs = app.config.database.kind === 'postgres' ? app.config.database.replicaMaxLagMs : 0;
  const positions: Positions =
    redisUrl === undefined ? new MemoryPositions() : new RedisPositions(redisUrl, Math.max(60_000, 10 * maxLagMs));
  let warnedAt = -Infinity;

  const choose = (request: FastifyRequest, position: Position) => {
    if (position === 'unknown') return; // Redis did not answer: the primary has everything
    const replica = replicas.choose(position);
    if (replica !== undefined) request.readDb = replica.db;
  };
  // Callback-style, like the hooks every request passes: an async hook costs promises each time.
  const chooseReplica = (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
    const position = positions.get(request.principal.subject);
    if (!(position instanceof Promise)) {
      choose(request, position);
      done();
      return;
    }
    position.then(
      (known) => {
        choose(request, known);
        done();
      },
      () => done(), // (get answers 'unknown' rather than fail)
    );
  };

  const recordWrite = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (reply.statusCode >= 400) return payload;
    try {
      await positions.set(request.principal.subject, await replicas.currentPosition());
    } catch (error) {
      // The write stands; its caller may read from a replica that lacks it for up to the lag.
      if (performance.now() - warnedAt > 60_000) {
        warnedAt = performance.now();
        request.log.warn({ err: error }, 'recording the position of a write failed: a read may not see it yet');
      }
    }
    return payload;
  };

  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.url.startsWith('/api/public/') || route.config?.primaryOnly === true) return;
    const methods = [route.method].flat();
    if (methods.every((m) => READS.has(m))) {
      route.preHandler = [...toArray(route.preHandler), chooseReplica];
    } else if (!methods.includes('OPTIONS')) {
      // After idempotency's onSend (registered before this plugin), which commits a keyed write.
      route.onSend = [...toArray(route.onSend), recordWrite];
    }
  });

  new Gauge({
    name: 'db_replica_lag_seconds',
    help: 'How far each read replica is behind the primary, in seconds (-1: down)',
    labelNames: ['replica'],
    registers: [app.metrics],
    collect() {
      for (const r of replicas.replicas)
        this.set({ replica: r.name }, r.healthy && Number.isFinite(r.lagMs) ? r.lagMs / 1000 : -1);
    },
  });
  const counted = { primary: 0, replica: 0 };
  new Counter({
    name: 'db_queries_total',
    help: 'Statements sent to the primary and to the read replicas',
    labelNames: ['target'],
    registers: [app.metrics],
    collect() {
      const primary = replicas.primaryPool.statements;
      const replica = replicas.replicas.reduce((n, r) => n + r.pool.statements, 0);
      this.inc({ target: 'primary' }, Math.max(0, primary - counted.primary));
      this.inc({ target: 'replica' }, Math.max(0, replica - counted.replica));
      counted.primary = primary;
      counted.replica = replica;
    },
  });

  const prune = setInterval(() => positions.prune(replicas.replayedByAll), 1000).unref();
  replicas.start();
  app.addHook('onClose', async () => {
    clearInterval(prune);
    await replicas.stop();
    await positions.close();
  });
}

function toArray<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

export default fp(readReplicas, { name: 'read-replicas', dependencies: ['idempotency'] });
