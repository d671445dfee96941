// The service's pool of PostgreSQL connections (docs/architecture.md, "How a connection lives and
// dies"). Its parts, one file each: a connection's life (pool-connection.ts: it dials the hosts
// itself through session.ts, and throws a connection's postgres.js client away whole when it
// ends), choosing a connection (pool-choice.ts), waiting for one (wait-queue.ts), when a failed
// statement is sent again (retry-rules.ts), and behind a pooler in transaction mode the hot
// statements' functions (statement-functions.ts). This file ties them together behind the
// pool's interface: query, reserve, onEveryConnection, end.
//
// Why a client per connection rather than one postgres.js client with `max: N`: in postgres.js
// 3.4, with more than one connection, the queue of busy connections keeps a hole per query until
// it drains, which never happens under continuous load, and every busy → open move searches it:
// each query costs O(queries so far) (porsager/postgres#747; docs/benchmark-log.md). With
// `max: 1` that queue holds at most one connection; the choice of connection is made here.
import type { PendingQuery, ReservedSql, Row, RowList, Sql } from 'postgres';
import { connectionTarget, type ConnectionTarget } from './connection-target.js';
import { connectionError, type DriverOptions } from './driver-client.js';
import { driverParameters, inlineParameters } from './inline-parameters.js';
import { endsConnection, isConnectionError } from './pg-errors.js';
import { forPlain, forWaiting, leastLoaded } from './pool-choice.js';
import { endSilent, PoolConnection, replaceUnheard, type Owner, type State } from './pool-connection.js';
import type { PoolMetrics, PoolOptions, QueryOptions, Reservation } from './pool-options.js';
import { reserveOn } from './reservation.js';
import { reconnectDelaySeconds } from './reconnect-delay.js';
import { sendAgain } from './retry-rules.js';
import { callText, isMissingFunction, StatementFunctions } from './statement-functions.js';
import { WaitQueue, type Waiter } from './wait-queue.js';

export { connectionLost } from './driver-client.js';
export type { PoolMetrics, PoolOptions, QueryOptions, Reservation } from './pool-options.js';

/** While no connection can be made, a statement starts a round of the hosts at most this often. */
const ON_DEMAND_ROUND_MS = 50;

export class PostgresPool {
  readonly #connections: PoolConnection[];
  readonly #target: ConnectionTarget;
  readonly #driverOptions: DriverOptions;
  readonly #translate: (error: unknown) => unknown;
  readonly #pipelineDepth: number;
  readonly #queueTimeoutMs: number;
  readonly #waiting: WaitQueue<PoolConnection>;
  readonly #functions: StatementFunctions;
  #watch: NodeJS.Timeout | undefined;
  /** The host the last connection opened on: each round of the hosts starts there. */
  #preferred = 0;
  /** Why no connection could be opened, while none is open (see #refusal). */
  #failing: unknown;
  /** When the last round of the hosts failed (performance.now()). */
  #failedAt = Number.NEGATIVE_INFINITY;
  #ended = false;
  /** When a plain statement last got its answer, and when a connection was last lost (performance.now()). */
  #answeredAt = Number.NEGATIVE_INFINITY;
  #lostAt = Number.NEGATIVE_INFINITY;
  #queueTimeouts = 0;
  #connectionErrors = 0;

  /**
   * Named prepared statements (false behind a pooler in transaction mode, which cannot keep
   * them: postgres.js then sends each statement unnamed, described first).
   */
  readonly prepare: boolean;
  /**
   * Values written into each statement, sent as one simple query (behind a pooler in transaction
   * mode: one round trip, pipelined; inline-parameters.ts), instead of as parameters.
   */
  readonly inline: boolean;
  /** Statements sent so far (the db_queries_total metric reads it). */
  statements = 0;

  constructor(url: string, size: number, driverOptions: DriverOptions, options: PoolOptions = {}) {
    if (!(size >= 1)) throw new RangeError(`pool size must be at least 1, not ${size}`);
    this.#target = connectionTarget(url);
    this.#driverOptions = driverOptions;
    this.#translate = options.translate ?? ((error) => error);
    this.#pipelineDepth = options.pipelineDepth ?? 32;
    this.#queueTimeoutMs = options.queueTimeoutMs ?? 5000;
    this.inline = options.inline ?? false;
    this.prepare = driverOptions.prepare !== false;
    this.#waiting = new WaitQueue(
      this.#queueTimeoutMs,
      // While no connection can be made, the wait was for one to open: that failure is the answer.
      () =>
        this.#failing ??
        connectionError('QUEUE_TIMEOUT', `no database connection was free within ${this.#queueTimeoutMs} ms`),
      (error) => {
        if ((error as { code?: unknown }).code === 'QUEUE_TIMEOUT') this.#queueTimeouts++;
      },
    );
    this.#functions = new StatementFunctions(this.#target, driverOptions, options.dial, () =>
      this.#ended ? undefined : this.#preferred,
    );
    const owner = this.#owner(options);
    this.#connections = Array.from({ length: size }, () => new PoolConnection(owner));
    const { answerTimeoutMs } = options;
    if (answerTimeoutMs !== undefined) {
      this.#watch = setInterval(
        () => endSilent(this.#connections, answerTimeoutMs),
        Math.min(1000, answerTimeoutMs / 4),
      ).unref();
    }
    if (options.lazy !== true) for (const connection of this.#connections) connection.open();
  }

  /** What the connections ask of the pool (pool-connection.ts). */
  #owner(options: PoolOptions): Owner {
    const backoff = options.backoff ?? reconnectDelaySeconds;
    const preferred = () => this.#preferred;
    return {
      target: this.#target,
      driverOptions: this.#driverOptions,
      dial: options.dial,
      get preferred() {
        return preferred();
      },
      isEnded: () => this.#ended,
      opened: (connection, index) => {
        this.#preferred = index;
        this.#failing = undefined;
        this.#drain();
        // The server is back: the other connections waiting out a backoff try at once.
        for (const other of this.#connections) if (other !== connection && other.backingOff) other.open();
      },
      failed: (_connection, error, startedAt, retries) => {
        this.#failedAt = performance.now();
        if (this.#connections.some((c) => c.state === 'open')) return backoff(retries);
        // None can be made: what waited since before this round began is refused; what came
        // after may have come after the server returned, and waits for the next round, soon.
        this.#failing = error;
        this.#waiting.refuse(error, startedAt);
        return this.#waiting.length > 0 ? ON_DEMAND_ROUND_MS / 1000 : backoff(retries);
      },
      lost: (connection, error) => {
        this.#lostAt = performance.now();
        this.#connectionErrors++;
        if ((error as { code?: unknown }).code === 'CONNECTION_UNANSWERED')
          replaceUnheard(this.#connections, connection.heardAt);
      },
      openFailed: () => {
        this.#connectionErrors++;
      },
      backoff,
      lifetime: options.lifetime ?? (() => 60 * (30 + Math.random() * 30)),
    };
  }

  /** The connections' states, in pool order (tests, docs). */
  connections(): { state: State; inflight: number; reserved: boolean }[] {
    return this.#connections.map(({ state, inflight, reserved }) => ({ state, inflight, reserved }));
  }

  metrics(): PoolMetrics {
    const open = this.#connections.filter((connection) => connection.state === 'open').length;
    const { length: waiting } = this.#waiting;
    return { open, waiting, queueTimeouts: this.#queueTimeouts, connectionErrors: this.#connectionErrors };
  }

  /** A statement that waited elsewhere for this pool (a gathered read) was refused for its wait. */
  queueTimedOut(): void {
    this.#queueTimeouts++;
  }

  // ---- statements ------------------------------------------------------------------------------

  /**
   * Runs one statement, prepared and pipelined: on the first free connection with room in its
   * pipeline, or with `spread` on the least loaded free one (pool-choice.ts); while others wait
   * for a connection, after them. A statement whose connection ends under it is sent once more,
   * on another connection, only when the caller declared it `repeatable` (retry-rules.ts).
   */
  query(text: string, parameters: readonly unknown[], options: QueryOptions = {}): Promise<RowList<Row[]>> {
    const connection = this.#free(options);
    return connection === undefined
      ? this.#wait(text, parameters, options)
      : this.#send(connection, text, parameters, options);
  }

  /** The connection for a statement sent now (pool-choice.ts); none while others wait. */
  #free(options: QueryOptions): PoolConnection | undefined {
    if (this.#waiting.length > 0) return undefined;
    return options.spread === true ? leastLoaded(this.#connections) : forPlain(this.#connections, this.#pipelineDepth);
  }

  /**
   * One statement on `connection`, counted in its pipeline while in flight. `firstLostAt`: it is
   * sent again, the first connection it was sent on having been lost then.
   */
  #send(
    connection: PoolConnection,
    text: string,
    parameters: readonly unknown[],
    options: QueryOptions,
    firstLostAt?: number,
  ): Promise<RowList<Row[]>> {
    const sql = connection.sql as Sql;
    // Built first: a value that cannot be written into the text (a NUL) fails it here, counting nothing.
    let pending: PendingQuery<Row[]>;
    try {
      pending = this.statement(sql, text, parameters);
    } catch (error) {
      return Promise.reject(asError(this.#translate(error)));
    }
    this.statements++;
    connection.sent(pending, true);
    return pending.then(
      (rows) => {
        this.#answeredAt = performance.now();
        connection.settled(pending, true, this.#answeredAt);
        this.#settled(connection);
        return rows;
      },
      (error: unknown) => {
        connection.settled(pending, true);
        this.#failedOn(connection, sql, error);
        if (isMissingFunction(error)) this.#functions.forget(text);
        const again = sendAgain({
          error,
          repeatable: options.repeatable === true,
          openedAt: connection.openedAt,
          firstLostAt,
          ended: this.#ended,
        });
        this.#settled(connection);
        if (again === 'connection') return this.#again(text, parameters, options, firstLostAt ?? this.#lostAt);
        if (again === 'text') return this.#again(text, parameters, options, performance.now());
        throw this.#translate(error);
      },
    );
  }

  /**
   * `error` failed a statement on `sql`, `connection`'s life: a socket's failure or a code that
   * ends a session ends it now; a read-only refusal (25006) retires it once nothing is in flight.
   */
  #failedOn(connection: PoolConnection, sql: Sql, error: unknown): void {
    if (endsConnection(error)) connection.died(sql);
    else if (isConnectionError(error) && connection.sql === sql) connection.retire();
  }

  /** A statement on `connection` settled: room in its pipeline, for what waits. */
  #settled(connection: PoolConnection): void {
    if (connection.retiring) connection.retireIfIdle();
    if (this.#waiting.length > 0) this.#drain();
  }

  #again(text: string, parameters: readonly unknown[], options: QueryOptions, firstLostAt: number) {
    const connection = this.#free(options);
    if (connection === undefined) return this.#wait(text, parameters, options, true);
    return this.#send(connection, text, parameters, options, firstLostAt);
  }

  /** One statement on `sql` (a pooled or a reserved connection), as this pool sends them. */
  statement(sql: Sql | ReservedSql, text: string, parameters: readonly unknown[]): PendingQuery<Row[]> {
    if (this.inline) {
      const name = this.#functions.nameOf(text);
      return sql
        .unsafe(name == null ? inlineParameters(text, parameters) : callText(name, parameters))
        .simple() as unknown as PendingQuery<Row[]>;
    }
    return sql.unsafe(text, driverParameters(parameters) as never[], { prepare: this.prepare });
  }

  /**
   * The server answered a statement within the last `withinMs`, and no connection was lost
   * since: it is reachable now, as surely as one more `select 1` would tell (readiness).
   */
  answeredWithin(withinMs: number): boolean {
    return this.#answeredAt > this.#lostAt && performance.now() - this.#answeredAt < withinMs;
  }

  /** A connection of its own until release(): for a transaction. */
  async reserve(): Promise<Reservation> {
    let connection = this.#waiting.length === 0 ? leastLoaded(this.#connections) : undefined;
    connection ??= await this.#waitForReservation();
    const taken = connection;
    return reserveOn(taken, {
      statement: (reserved, text, parameters, simple) => {
        this.statements++;
        return simple
          ? (reserved.unsafe(text).simple() as unknown as PendingQuery<Row[]>)
          : this.statement(reserved, text, parameters);
      },
      failed: (sql, error) => this.#failedOn(taken, sql, error),
      release: () => this.#handOver(taken),
    });
  }

  /**
   * Runs one statement on every connection, together, prepared as plain queries are (warm-up,
   * tests): each connection's rows, in pool order. A connection still opening is waited for; one
   * a transaction holds runs it after.
   */
  onEveryConnection(text: string, parameters: readonly unknown[]): Promise<RowList<Row[]>[]> {
    return Promise.all(
      this.#connections.map((connection) =>
        connection.whenOpen().then(() => this.#send(connection, text, parameters, { repeatable: true })),
      ),
    );
  }

  async end(options: { timeout?: number } = {}): Promise<void> {
    this.#ended = true;
    clearInterval(this.#watch);
    const ended = connectionError('CONNECTION_ENDED', 'The pool was ended');
    this.#waiting.end(ended);
    await Promise.all(this.#connections.map((connection) => connection.end(ended, options)));
  }

  // ---- statement functions (behind a pooler in transaction mode) ------------------------------

  /**
   * `text` is a hot statement (a prepared query, db/prepared.ts): behind a pooler in transaction
   * mode its function is made in the background, and once made it is sent as a call of it.
   */
  hot(text: string): void {
    if (this.inline && !this.#ended) this.#functions.hot(text);
  }

  /** How many hot statements go out as calls of their function, and how many as text (tests, docs). */
  statementFunctions(): { calls: number; texts: number } {
    return this.#functions.counts();
  }

  // ---- waiting for a connection ----------------------------------------------------------------

  #wait(text: string, parameters: readonly unknown[], options: QueryOptions, retried = false): Promise<RowList<Row[]>> {
    const refused = this.#refusal();
    if (refused !== undefined) return Promise.reject(asError(this.#translate(refused)));
    // Sent once already (its connection ended under it): not a second time.
    const sent = retried ? { ...options, repeatable: false } : options;
    return new Promise<RowList<Row[]>>((resolve, reject) => {
      this.#enqueue({
        need: options.spread === true ? 'spread' : 'plain',
        at: performance.now(),
        take: (connection) => resolve(this.#send(connection, text, parameters, sent)),
        reject: (error) => reject(asError(this.#translate(error))),
      });
    });
  }

  #waitForReservation(): Promise<PoolConnection> {
    const refused = this.#refusal();
    if (refused !== undefined) return Promise.reject(asError(refused));
    return new Promise<PoolConnection>((resolve, reject) =>
      this.#enqueue({
        need: 'reserve',
        at: performance.now(),
        take: (connection) => {
          connection.reserved = true;
          resolve(connection);
        },
        reject,
      }),
    );
  }

  /**
   * Why a statement is refused now rather than queued: no connection is open, and none can be.
   * While none is open and the last round failed, a statement waits for a round of the hosts in
   * flight, or starts one at once when the connections are all waiting out their backoff and the
   * last failed more than ON_DEMAND_ROUND_MS ago: the first statement after the server returns is
   * served, not refused for up to a second of backoff. Otherwise it is refused at once (a server
   * that refuses connections costs the callers nothing, and at most one round per 50 ms).
   */
  #refusal(): unknown {
    if (this.#ended) return connectionError('CONNECTION_ENDED', 'The pool was ended');
    if (this.#failing === undefined) return undefined;
    if (this.#connections.some((connection) => connection.state === 'opening')) return undefined;
    const waiting = this.#connections.find((connection) => connection.backingOff);
    if (waiting !== undefined && performance.now() - this.#failedAt >= ON_DEMAND_ROUND_MS) {
      waiting.open();
      return undefined;
    }
    return this.#failing;
  }

  #enqueue(waiter: Waiter<PoolConnection>): void {
    this.#waiting.push(waiter);
    // A lazy pool's first demand opens its connections.
    for (const connection of this.#connections)
      if (connection.state === 'down' && !connection.backingOff) connection.open();
  }

  /** What waits goes to the connections that can take it, in order (pool-choice.ts, forWaiting). */
  #drain(): void {
    this.#waiting.drain((need) => forWaiting(this.#connections, need, this.#pipelineDepth));
  }

  /** A released connection goes to what waits, else back to plain queries. */
  #handOver(connection: PoolConnection): void {
    connection.reserved = false;
    if (connection.retiring) connection.retireIfIdle();
    this.#drain();
  }
}

/** What a promise is rejected with: the error itself, or one that carries a non-error as its cause. */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error), { cause: error });
}
