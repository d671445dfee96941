// Read replicas (DATABASE_REPLICA_URLS; docs/operations.md "Running at scale"). Each replica is a
// database of its own whose statements fall back to the primary (create-database.ts). Every
// POLL_MS this set asks the primary for its WAL position and each replica for what it has
// replayed: a replica that does not answer, or lags more than REPLICA_MAX_LAG_MS, is skipped
// until it recovers; a read whose caller wrote goes to a replica only once that replica has
// replayed the caller's last commit (http/database/read-replicas.ts keeps those positions).
import { sql, type Kysely } from 'kysely';
import type { Config } from '../config/config.js';
import { createReplicaDatabase } from './create-database.js';
import type { Database } from './database.js';
import type { PostgresPool } from './postgres-pool.js';

const POLL_MS = 250;
const CHECK_TIMEOUT_MS = 1000;

export interface Replica {
  /** host:port, for metrics and logs (never credentials). */
  readonly name: string;
  readonly db: Kysely<Database>;
  readonly pool: PostgresPool;
  healthy: boolean;
  /** The WAL position it has replayed (0 until known). */
  replayed: bigint;
  /** How far behind the primary it is, in milliseconds (0 when it has replayed all). */
  lagMs: number;
}

/** A WAL position as PostgreSQL prints it ("16/B374D848") → a number that orders like it. */
export function parseLsn(text: string): bigint {
  const [high = '0', low = '0'] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

export class ReplicaSet {
  readonly replicas: readonly Replica[];
  /** The primary's WAL position at the last check. */
  primaryPosition = 0n;
  #next = 0;
  /** The primary's positions at each check, oldest first: when the primary was where a replica is. */
  #history: { position: bigint; at: number }[] = [];
  #trimmed = false;
  #timer: NodeJS.Timeout | undefined;
  #checking: Promise<void> | undefined;

  constructor(
    replicas: Replica[],
    private readonly primary: Kysely<Database>,
    /** The primary's pool: its statement count, a replica's fallbacks included (metrics). */
    readonly primaryPool: PostgresPool,
    private readonly maxLagMs: number,
    private readonly onDown: (replica: Replica, error: unknown) => void = () => {},
  ) {
    this.replicas = replicas;
  }

  /**
   * A replica for a read, taking turns among those that are up, lag at most REPLICA_MAX_LAG_MS
   * and have replayed `position` (the caller's last commit); undefined: read from the primary.
   */
  choose(position: bigint | undefined): Replica | undefined {
    const n = this.replicas.length;
    for (let i = 0; i < n; i++) {
      const index = (this.#next + i) % n;
      const replica = this.replicas[index];
      if (replica === undefined || !replica.healthy || replica.lagMs > this.maxLagMs) continue;
      if (position !== undefined && replica.replayed < position) continue;
      this.#next = (index + 1) % n;
      return replica;
    }
    return undefined;
  }

  /** The lowest position every replica has replayed (what no caller needs to be remembered for). */
  get replayedByAll(): bigint {
    let low: bigint | undefined;
    for (const r of this.replicas) if (low === undefined || r.replayed < low) low = r.replayed;
    return low ?? 0n;
  }

  /** The primary's WAL position now: a commit that has answered lies at or before it. */
  async currentPosition(): Promise<bigint> {
    const { rows } = await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(this.primary);
    const position = parseLsn(rows[0]?.lsn ?? '0/0');
    if (position > this.primaryPosition) this.primaryPosition = position;
    return position;
  }

  /** One round of checks: the primary's position, then each replica's replay and lag. */
  check(): Promise<void> {
    this.#checking ??= this.#check().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  /**
   * How far behind the primary a replica that has replayed `replayed` is, in milliseconds: since
   * the primary moved past that position (0 when it has not). The time since the last replayed
   * commit would grow without bound while the primary is idle, and a caught-up replica of a
   * quiet primary would look stale.
   */
  lagOf(replayed: bigint, now = performance.now(), sinceLastReplayMs = Infinity): number {
    const passed = this.#history.find((h) => h.position > replayed);
    if (passed === undefined) return 0;
    // Behind the first position this set ever saw (it started a moment ago): the age of the last
    // commit the replica replayed bounds how stale it can be.
    if (passed === this.#history[0] && !this.#trimmed) return sinceLastReplayMs;
    // Older than what is kept: at least as old as the oldest sample.
    return now - passed.at;
  }

  async #check(): Promise<void> {
    const primary = await this.currentPosition().catch(() => undefined);
    const now = performance.now();
    if (primary !== undefined && (this.#history.at(-1)?.position ?? -1n) < primary)
      this.#history.push({ position: primary, at: now });
    // Kept long enough to tell a replica within the bound from one past it.
    const keep = Math.max(2 * this.maxLagMs, 10_000);
    while (this.#history.length > 1 && now - (this.#history[1]?.at ?? now) > keep) {
      this.#history.shift();
      this.#trimmed = true;
    }
    await Promise.all(
      this.replicas.map(async (replica) => {
        try {
          const rows = await within(
            replica.pool.query(
              `select pg_is_in_recovery() as standby, coalesce(pg_last_wal_replay_lsn(), '0/0')::text as lsn,
                      extract(epoch from now() - pg_last_xact_replay_timestamp())::float8 * 1000 as since`,
              [],
            ),
            CHECK_TIMEOUT_MS,
          );
          const row = rows[0] as { standby: boolean; lsn: string; since: number | null } | undefined;
          if (row === undefined || !row.standby) throw new Error('not a standby in recovery');
          replica.replayed = parseLsn(row.lsn);
          replica.lagMs = this.lagOf(replica.replayed, now, row.since ?? Infinity);
          replica.healthy = true;
        } catch (error) {
          if (replica.healthy) this.onDown(replica, error);
          replica.healthy = false;
        }
      }),
    );
  }

  start(): void {
    const tick = () => {
      void this.check().finally(() => {
        if (this.#timer !== undefined) this.#timer = setTimeout(tick, POLL_MS).unref();
      });
    };
    this.#timer = setTimeout(tick, 0).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#checking;
    await Promise.all(this.replicas.map((r) => r.db.destroy()));
  }
}

function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The replicas of DATABASE_REPLICA_URLS, each falling back to `primaryPool`; undefined when none. */
export function createReplicaSet(
  config: Config['database'],
  primary: Kysely<Database>,
  primaryPool: PostgresPool | undefined,
  options: { schema?: string; onDown?: (replica: Replica, error: unknown) => void } = {},
): ReplicaSet | undefined {
  if (config.kind !== 'postgres' || config.replicaUrls.length === 0 || primaryPool === undefined) return undefined;
  const replicas = config.replicaUrls.map((url): Replica => {
    const { db, pool } = createReplicaDatabase(
      config,
      url,
      primaryPool,
      options.schema === undefined ? {} : { schema: options.schema },
    );
    const { hostname, port } = new URL(url);
    return { name: `${hostname}:${port || '5432'}`, db, pool, healthy: false, replayed: 0n, lagMs: Infinity };
  });
  return new ReplicaSet(replicas, primary, primaryPool, config.replicaMaxLagMs, options.onDown);
}
