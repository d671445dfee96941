// The service's pool of PostgreSQL connections. It owns each connection's life: it dials the
// hosts of the URL itself, opens each connection with a statement of its own that says whether
// the session is one the URL asks for (the primary, with several hosts), throws the connection's
// postgres.js client away whole when it dies (driver-client.ts), settles every statement that
// was on it, and opens another at a pace of its own (at most a second apart, jittered).
// docs/architecture.md, "How a connection lives and dies".
//
// Why a client per connection rather than one postgres.js client with `max: N`: in postgres.js
// 3.4, with more than one connection, the queue of busy connections is shifted and pushed once
// per query and keeps a hole per shift until it drains completely, which never happens under
// continuous load; every busy → open move is then an indexOf over that ever-growing array, so
// each query costs O(queries so far) and throughput decays for as long as the load lasts
// (porsager/postgres#747; docs/benchmark-log.md has the profile). With `max: 1` that queue holds
// at most one connection and drains on every query; the choice of connection is made here.
//
// Plain queries go to the first open connection that no transaction holds and that has room in
// its pipeline (32 in flight), where postgres.js prepares and pipelines them: concurrent reads
// share few connections and few writes, and the others stay free for transactions. A heavy
// write outside a transaction (placing an order) goes to the least loaded free connection
// instead, so that writes spread over the backends and never sit in the reads' pipeline. A
// transaction reserves a whole connection from BEGIN to COMMIT/ROLLBACK; once it is chosen, no
// new plain query is sent there, so the reservation waits only for the queries already in
// flight. When no connection is free, statements and transactions wait here, in FIFO order, for
// at most `queueTimeoutMs`; when none can be opened, they are refused at once.
import type { PendingQuery, ReservedSql, Row, RowList, Sql } from 'postgres';
import { accepts, connectionTarget, SESSION_STATE, type ConnectionTarget } from './connection-target.js';
import { connectionError, connectionLost, singleUseClient, type Dial, type DriverOptions } from './driver-client.js';
import { driverParameters, inlineParameters } from './inline-parameters.js';
import { isConnectionError } from './pg-errors.js';
import { reconnectDelaySeconds } from './reconnect-delay.js';
import { callText, FUNCTION_PREFIX, makeStatementFunction } from './statement-functions.js';

export { connectionLost } from './driver-client.js';

/** How one statement outside a transaction is sent. */
export interface QueryOptions {
  /** To the least loaded free connection, not into the reads' pipeline (a heavy write). */
  spread?: boolean | undefined;
  /**
   * The caller declares that the statement may be sent again after its connection was lost
   * (a read by key: it changes nothing). Nothing else is ever sent twice.
   */
  repeatable?: boolean | undefined;
}

export interface PoolOptions {
  /** Plain queries in flight on one connection before the next one is used (32). */
  pipelineDepth?: number;
  /** Values written into each statement, sent as one simple query (behind a pooler in transaction mode). */
  inline?: boolean;
  /**
   * Connections open on first demand instead of at once (behind a pooler in transaction mode:
   * each opening statement would take a server connection before the service has set its role's
   * time-outs, and the pooler would keep handing out those, without them).
   */
  lazy?: boolean;
  /** How long a statement or a transaction may wait for a free connection (ms; 5000). */
  queueTimeoutMs?: number;
  /** Seconds before a connection's next round of the hosts after `retries` failed ones. */
  backoff?: (retries: number) => number;
  /** A connection's life before it is replaced while idle (seconds, drawn per connection; 30–60 min). */
  lifetime?: () => number;
  /** Opens each socket (tests put a front of their own here; TCP by default). */
  dial?: Dial;
  /** What a failed statement of `query()` is turned into (the dialect's DatabaseUnavailable). */
  translate?: (error: unknown) => unknown;
}

/** A reserved connection: a transaction's, from BEGIN to COMMIT or ROLLBACK. */
export interface Reservation {
  readonly sql: ReservedSql;
  /** One statement on it; rejected (CONNECTION_CLOSED) if the connection dies before its answer. */
  run(text: string, parameters: readonly unknown[], simple?: boolean): Promise<RowList<Row[]>>;
  /** True once the connection has closed: nothing may be sent on it. */
  isLost(): boolean;
  release(): void;
}

type State = 'down' | 'opening' | 'open';

/** One connection of the pool, across its lives. */
interface Slot {
  /** The client of the connection's current life, while opening or open. */
  sql: Sql | undefined;
  state: State;
  /** Plain queries sent and not yet answered. */
  inflight: number;
  /** A transaction holds (or is about to hold) this connection. */
  reserved: boolean;
  /** Past its lifetime: no new plain query; replaced once idle. */
  retiring: boolean;
  /** Every statement sent on the current life and not yet settled. */
  sent: Set<PendingQuery<Row[]>>;
  /** Failed rounds of the hosts since the connection was last open. */
  retries: number;
  /** When the current life opened (performance.now()). */
  openedAt: number;
  timer: NodeJS.Timeout | undefined;
  lifeTimer: NodeJS.Timeout | undefined;
  /** The reservation holding it learns of the connection's death here. */
  onClose: (() => void) | undefined;
  /** Waiting for this connection to open (onEveryConnection). */
  opened: { resolve: () => void; reject: (error: unknown) => void }[];
}

type Waiter =
  | { kind: 'reserve'; at: number; resolve: (slot: Slot) => void; reject: (error: unknown) => void }
  | {
      kind: 'query';
      at: number;
      text: string;
      parameters: readonly unknown[];
      options: QueryOptions;
      resolve: (rows: Promise<RowList<Row[]>>) => void;
      reject: (error: unknown) => void;
    };

/** How long making one statement function may take before the statement stays text for now. */
const MAKE_TIMEOUT_MS = 10_000;
const noop = (): void => {};
/** While no connection can be made, a statement starts a round of the hosts at most this often. */
const ON_DEMAND_ROUND_MS = 50;

export class PostgresPool {
  readonly #slots: Slot[];
  readonly #target: ConnectionTarget;
  readonly #driverOptions: DriverOptions;
  readonly #dial: Dial | undefined;
  readonly #backoff: (retries: number) => number;
  readonly #lifetime: () => number;
  readonly #translate: (error: unknown) => unknown;
  readonly #pipelineDepth: number;
  readonly #queueTimeoutMs: number;
  readonly #waiting = new Fifo<Waiter>();
  #sweeper: NodeJS.Timeout | undefined;
  /** The host the last connection opened on: each round of the hosts starts there. */
  #preferred = 0;
  /** Why no connection could be opened, while none is open (see #refusal). */
  #failing: unknown;
  /** When the last round of the hosts failed (performance.now()). */
  #failedAt = Number.NEGATIVE_INFINITY;
  #ended = false;

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
  /**
   * Behind a pooler in transaction mode, each hot statement's function (statement-functions.ts)
   * by the statement's text: its name; null while it is being made, or when it cannot be one.
   */
  readonly #functions = new Map<string, string | null>();
  #making: Promise<void> = Promise.resolve();
  /** Statements sent so far (the db_queries_total metric reads it). */
  statements = 0;
  /** When a plain statement last got its answer, and when one last lost its connection (performance.now()). */
  #answeredAt = Number.NEGATIVE_INFINITY;
  #lostAt = Number.NEGATIVE_INFINITY;

  constructor(url: string, size: number, driverOptions: DriverOptions, options: PoolOptions = {}) {
    if (!(size >= 1)) throw new RangeError(`pool size must be at least 1, not ${size}`);
    this.#target = connectionTarget(url);
    this.#driverOptions = driverOptions;
    this.#dial = options.dial;
    this.#backoff = options.backoff ?? reconnectDelaySeconds;
    this.#lifetime = options.lifetime ?? (() => 60 * (30 + Math.random() * 30));
    this.#translate = options.translate ?? ((error) => error);
    this.#pipelineDepth = options.pipelineDepth ?? 32;
    this.#queueTimeoutMs = options.queueTimeoutMs ?? 5000;
    this.inline = options.inline ?? false;
    this.prepare = driverOptions.prepare !== false;
    this.#slots = Array.from({ length: size }, (): Slot => ({
      sql: undefined,
      state: 'down',
      inflight: 0,
      reserved: false,
      retiring: false,
      sent: new Set(),
      retries: 0,
      openedAt: 0,
      timer: undefined,
      lifeTimer: undefined,
      onClose: undefined,
      opened: [],
    }));
    if (options.lazy !== true) for (const slot of this.#slots) this.#open(slot);
  }

  /** Opens the connections never opened yet (a lazy pool's first demand). */
  #openUnopened(): void {
    for (const slot of this.#slots) if (slot.state === 'down' && slot.timer === undefined) this.#open(slot);
  }

  /** The connections' states, in pool order (tests, docs). */
  connections(): { state: State; inflight: number; reserved: boolean }[] {
    return this.#slots.map(({ state, inflight, reserved }) => ({ state, inflight, reserved }));
  }

  // ---- statements ------------------------------------------------------------------------------

  /**
   * Runs one statement, prepared and pipelined: on the first free connection with room in its
   * pipeline, or with `spread` on the least loaded free one. A write that locks rows and runs far
   * longer than a read (placing an order) is sent with `spread`: in the reads' pipeline it would
   * hold up every read behind it, wait there for its locks while they wait, and put all writes on
   * one backend (one core of PostgreSQL's). A statement whose connection dies under it is sent
   * once more, on another connection, only when the caller declared it `repeatable`.
   */
  query(text: string, parameters: readonly unknown[], options: QueryOptions = {}): Promise<RowList<Row[]>> {
    const slot = options.spread === true ? this.#leastLoaded() : this.#forQuery();
    if (slot === undefined) return this.#wait(text, parameters, options);
    return this.#send(slot, text, parameters, options);
  }

  /**
   * One statement on `slot`, counted in its pipeline while in flight: one promise past the driver's.
   * `lostAt`: it is sent again, its first connection having died then.
   */
  #send(
    slot: Slot,
    text: string,
    parameters: readonly unknown[],
    options: QueryOptions,
    lostAt?: number,
  ): Promise<RowList<Row[]>> {
    const sql = slot.sql as Sql;
    // Built first: a value that cannot be written into the text (a NUL) fails it here, counting nothing.
    let pending: PendingQuery<Row[]>;
    try {
      pending = this.statement(sql, text, parameters);
    } catch (error) {
      return Promise.reject(asError(this.#translate(error)));
    }
    slot.inflight++;
    slot.sent.add(pending);
    this.statements++;
    return pending.then(
      (rows) => {
        slot.inflight--;
        slot.sent.delete(pending);
        this.#answeredAt = performance.now();
        if (slot.retiring) this.#retireIfIdle(slot);
        return rows;
      },
      (error: unknown) => {
        slot.inflight--;
        slot.sent.delete(pending);
        if (isConnectionError(error)) {
          this.#lostAt = performance.now();
          this.#died(slot, sql);
          // Sent again once; and again while the connection that failed it was open before the
          // first one died (a server restart closes them all, and a pool whose process was busy
          // learns it one connection at a time): at most once per connection of the pool.
          if (options.repeatable === true && !this.#ended && (lostAt === undefined || slot.openedAt < lostAt)) {
            return this.#again(text, parameters, options, lostAt ?? this.#lostAt);
          }
        } else if (this.#isMissingFunction(error)) {
          // A statement function dropped under the running service: the text again, and a new one.
          this.#functions.delete(text);
          if (lostAt === undefined) return this.#again(text, parameters, options, performance.now());
        }
        if (slot.retiring) this.#retireIfIdle(slot);
        throw this.#translate(error);
      },
    );
  }

  #again(text: string, parameters: readonly unknown[], options: QueryOptions, lostAt: number): Promise<RowList<Row[]>> {
    const slot = options.spread === true ? this.#leastLoaded() : this.#forQuery();
    if (slot === undefined) return this.#wait(text, parameters, options, true);
    return this.#send(slot, text, parameters, options, lostAt);
  }

  /** One statement on `sql` (a pooled or a reserved connection), as this pool sends them. */
  statement(sql: Sql | ReservedSql, text: string, parameters: readonly unknown[]): PendingQuery<Row[]> {
    if (this.inline) {
      const name = this.#functions.get(text);
      return sql
        .unsafe(name == null ? inlineParameters(text, parameters) : callText(name, parameters))
        .simple() as unknown as PendingQuery<Row[]>;
    }
    return sql.unsafe(text, driverParameters(parameters) as never[], { prepare: this.prepare });
  }

  /**
   * The server answered a statement within the last `withinMs`, and none has lost its connection
   * since: it is reachable now, as surely as one more `select 1` would tell (readiness).
   */
  answeredWithin(withinMs: number): boolean {
    return this.#answeredAt > this.#lostAt && performance.now() - this.#answeredAt < withinMs;
  }

  /** A connection of its own until release(): for a transaction. */
  async reserve(): Promise<Reservation> {
    let slot = this.#leastLoaded();
    if (slot === undefined) slot = await this.#waitForReservation();
    slot.reserved = true;
    const sql = slot.sql;
    if (sql === undefined || slot.state !== 'open') {
      // It died in the turn between being handed over and being taken.
      this.#handOver(slot);
      throw connectionLost();
    }
    let isLost = false;
    let lose: (error: Error) => void = noop;
    const lost = new Promise<never>((_, reject) => (lose = reject));
    lost.catch(noop);
    slot.onClose = () => {
      isLost = true;
      lose(connectionLost());
    };
    let reserved: ReservedSql;
    try {
      reserved = await Promise.race([sql.reserve(), lost]);
    } catch (error) {
      slot.onClose = undefined;
      this.#handOver(slot);
      throw error;
    }
    let released = false;
    const owner = slot;
    return {
      sql: reserved,
      isLost: () => isLost,
      run: (text, parameters, simple = false) => {
        if (isLost) return Promise.reject(connectionLost());
        this.statements++;
        const pending = simple
          ? (reserved.unsafe(text).simple() as unknown as PendingQuery<Row[]>)
          : this.statement(reserved, text, parameters);
        owner.sent.add(pending);
        return pending.then(
          (rows) => {
            owner.sent.delete(pending);
            return rows;
          },
          (error: unknown) => {
            owner.sent.delete(pending);
            if (isConnectionError(error)) this.#died(owner, sql);
            throw error;
          },
        );
      },
      release: () => {
        if (released) return;
        released = true;
        owner.onClose = undefined;
        if (!isLost) reserved.release();
        this.#handOver(owner);
      },
    };
  }

  /**
   * Runs one statement on every connection, together, prepared as plain queries are (warm-up,
   * tests): each connection's rows, in pool order. A connection still opening is waited for; one
   * a transaction holds runs it after.
   */
  onEveryConnection(text: string, parameters: readonly unknown[]): Promise<RowList<Row[]>[]> {
    return Promise.all(
      this.#slots.map((slot) =>
        this.#whenOpen(slot).then(() => this.#send(slot, text, parameters, { repeatable: true })),
      ),
    );
  }

  /** The client a cursor may use: the least loaded open one (undefined while none is open). */
  anyClient(): Sql | undefined {
    return (this.#leastLoaded() ?? this.#slots.find((slot) => slot.state === 'open'))?.sql;
  }

  async end(options: { timeout?: number } = {}): Promise<void> {
    this.#ended = true;
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
    const ended = connectionError('CONNECTION_ENDED', 'The pool was ended');
    for (let waiter = this.#waiting.shift(); waiter !== undefined; waiter = this.#waiting.shift()) waiter.reject(ended);
    await Promise.all(
      this.#slots.map((slot) => {
        clearTimeout(slot.timer);
        clearTimeout(slot.lifeTimer);
        for (const opened of slot.opened.splice(0)) opened.reject(ended);
        const { sql } = slot;
        return sql === undefined ? Promise.resolve() : sql.end(options).catch(noop);
      }),
    );
  }

  // ---- statement functions (behind a pooler in transaction mode) ------------------------------

  /**
   * `text` is a hot statement (a prepared query, db/prepared.ts): behind a pooler in transaction
   * mode its function is made in the background, and once made it is sent as a call of it.
   */
  hot(text: string): void {
    if (!this.inline || this.#functions.has(text)) return;
    this.#functions.set(text, null);
    this.#making = this.#making.then(async () => {
      // A connection of its own for making them, one after another: a statement's description
      // (Parse, Describe) pipelined among another client's simple queries leaves PgBouncer 1.18
      // with answers for a server connection it has already unlinked, and the client waiting.
      const endpoint = this.#target.endpoints[this.#preferred] ?? this.#target.endpoints[0];
      if (endpoint === undefined || this.#ended) return void this.#functions.delete(text);
      const sql = singleUseClient(
        this.#target.driverUrl,
        endpoint,
        { ...this.#driverOptions, prepare: false, idle_timeout: 1, onclose: undefined },
        { dial: this.#dial, onDeath: noop },
      );
      let timer: NodeJS.Timeout | undefined;
      try {
        const name = await Promise.race([
          makeStatementFunction(sql, text),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('statement function: no answer')), MAKE_TIMEOUT_MS).unref();
          }),
        ]);
        if (name !== undefined && this.#functions.has(text)) this.#functions.set(text, name);
      } catch {
        // The server could not be reached: tried again the next time the statement runs.
        this.#functions.delete(text);
      } finally {
        clearTimeout(timer);
        await sql.end({ timeout: 0 }).catch(noop);
      }
    });
  }

  /** How many hot statements go out as calls of their function, and how many as text (tests, docs). */
  statementFunctions(): { calls: number; texts: number } {
    let calls = 0;
    for (const name of this.#functions.values()) if (name !== null) calls++;
    return { calls, texts: this.#functions.size - calls };
  }

  #isMissingFunction(error: unknown): boolean {
    const { code, message } = error as { code?: unknown; message?: unknown };
    return code === '42883' && typeof message === 'string' && message.includes(FUNCTION_PREFIX);
  }

  // ---- a connection's life ---------------------------------------------------------------------

  /** Opens `slot`'s next life: a round of the hosts, from the one that served last. */
  #open(slot: Slot): void {
    if (this.#ended || slot.state !== 'down') return;
    slot.state = 'opening';
    void this.#round(slot);
  }

  async #round(slot: Slot): Promise<void> {
    const { endpoints, attrs, driverUrl } = this.#target;
    const startedAt = performance.now();
    let failure: unknown = connectionError('CONNECTION_CLOSED', 'no host could be reached');
    for (let k = 0; k < endpoints.length && !this.#ended; k++) {
      const index = (this.#preferred + k) % endpoints.length;
      const endpoint = endpoints[index] as (typeof endpoints)[number];
      const sql = singleUseClient(driverUrl, endpoint, this.#driverOptions, {
        dial: this.#dial,
        onDeath: () => this.#died(slot, sql),
      });
      slot.sql = sql;
      try {
        const [state] = (await withDeadline(
          sql.unsafe(SESSION_STATE).simple(),
          ((Number(this.#driverOptions.connect_timeout) || 30) + 1) * 1000,
        )) as unknown as ({ standby: boolean; read_only: string } | undefined)[];
        if (slot.sql === sql && !this.#isEnded()) {
          if (state !== undefined && accepts(attrs, state)) {
            this.#opened(slot, index);
            return;
          }
          failure = connectionError('25006', `${endpoint.host}:${endpoint.port} is not a ${attrs} server`);
        }
      } catch (error) {
        failure = error;
      }
      if (slot.sql === sql) slot.sql = undefined;
      void sql.end({ timeout: 0 }).catch(noop);
    }
    if (this.#ended) return;
    slot.state = 'down';
    slot.retries++;
    this.#failedAt = performance.now();
    for (const opened of slot.opened.splice(0)) opened.reject(failure);
    // Statements that came after this round began may have come after the server returned: they
    // wait for the next round, 50 ms on, rather than take this round's failure.
    const more = !this.#slots.some((other) => other.state === 'open') && this.#refuseAll(failure, startedAt);
    this.#reopenAfter(slot, more ? ON_DEMAND_ROUND_MS / 1000 : this.#backoff(slot.retries));
  }

  #opened(slot: Slot, index: number): void {
    slot.state = 'open';
    slot.openedAt = performance.now();
    slot.retries = 0;
    slot.retiring = false;
    this.#preferred = index;
    this.#failing = undefined;
    slot.lifeTimer = setTimeout(() => {
      slot.retiring = true;
      this.#retireIfIdle(slot);
    }, this.#lifetime() * 1000).unref();
    for (const opened of slot.opened.splice(0)) opened.resolve();
    if (!slot.reserved) this.#serve(slot);
    // The server is back: the other connections waiting out a backoff try at once.
    for (const other of this.#slots) {
      if (other.state === 'down' && other.timer !== undefined) {
        clearTimeout(other.timer);
        other.timer = undefined;
        this.#open(other);
      }
    }
  }

  /** `slot`'s next life opens after `seconds` (sooner if another connection opens meanwhile). */
  #reopenAfter(slot: Slot, seconds: number): void {
    slot.timer = setTimeout(() => {
      slot.timer = undefined;
      this.#open(slot);
    }, seconds * 1000).unref();
  }

  /**
   * `sql`, `slot`'s client, is over (its socket closed or failed): every statement on it settles
   * now, a reservation holding it learns of it, and the next life opens after a short wait.
   */
  #died(slot: Slot, sql: Sql): void {
    if (slot.sql !== sql || slot.state !== 'open') return; // opening: its round goes on
    this.#close(slot, sql, connectionLost());
    this.#reopenAfter(slot, this.#backoff(0));
  }

  /** A connection past its lifetime, once idle: replaced at once. */
  #retireIfIdle(slot: Slot): void {
    const { sql } = slot;
    if (slot.state !== 'open' || slot.inflight > 0 || slot.reserved || sql === undefined || this.#ended) return;
    this.#close(slot, sql, connectionLost());
    this.#open(slot);
  }

  #close(slot: Slot, sql: Sql, error: Error): void {
    slot.sql = undefined;
    slot.state = 'down';
    slot.retiring = false;
    clearTimeout(slot.lifeTimer);
    slot.lifeTimer = undefined;
    const onClose = slot.onClose;
    slot.onClose = undefined;
    onClose?.();
    // postgres.js leaves some unsettled (one sent between the socket's error and its close, or
    // queued while it would reconnect): each is rejected here, and its handler runs as usual.
    for (const pending of slot.sent) (pending as unknown as { reject(error: Error): void }).reject(error);
    slot.sent.clear();
    void sql.end({ timeout: 0 }).catch(noop);
  }

  /** (A method: a field read after an await is not narrowed by the check before it.) */
  #isEnded(): boolean {
    return this.#ended;
  }

  #whenOpen(slot: Slot): Promise<void> {
    if (slot.state === 'open') return Promise.resolve();
    if (this.#ended) return Promise.reject(connectionError('CONNECTION_ENDED', 'The pool was ended'));
    if (slot.state === 'down' && slot.timer === undefined) this.#open(slot);
    return new Promise((resolve, reject) => slot.opened.push({ resolve, reject }));
  }

  // ---- waiting for a connection ----------------------------------------------------------------

  #wait(text: string, parameters: readonly unknown[], options: QueryOptions, retried = false): Promise<RowList<Row[]>> {
    const refused = this.#refusal();
    if (refused !== undefined) return Promise.reject(asError(this.#translate(refused)));
    return new Promise<RowList<Row[]>>((resolve, reject) => {
      this.#enqueue({
        kind: 'query',
        at: performance.now(),
        text,
        parameters,
        // Sent once already (its connection died under it): not a second time.
        options: retried ? { ...options, repeatable: false } : options,
        resolve,
        reject: (error) => reject(asError(this.#translate(error))),
      });
    });
  }

  #waitForReservation(): Promise<Slot> {
    const refused = this.#refusal();
    if (refused !== undefined) return Promise.reject(asError(refused));
    return new Promise<Slot>((resolve, reject) =>
      this.#enqueue({ kind: 'reserve', at: performance.now(), resolve, reject }),
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
    if (this.#slots.some((slot) => slot.state === 'opening')) return undefined;
    const waiting = this.#slots.find((slot) => slot.state === 'down' && slot.timer !== undefined);
    if (waiting !== undefined && performance.now() - this.#failedAt >= ON_DEMAND_ROUND_MS) {
      clearTimeout(waiting.timer);
      waiting.timer = undefined;
      this.#open(waiting);
      return undefined;
    }
    return this.#failing;
  }

  #enqueue(waiter: Waiter): void {
    this.#waiting.push(waiter);
    this.#openUnopened();
    if (this.#sweeper === undefined) {
      const every = Math.max(10, Math.min(100, this.#queueTimeoutMs / 4));
      this.#sweeper = setInterval(() => this.#sweep(), every).unref();
    }
  }

  /** Refuses what has waited longer than the queue's time-out (the oldest are first). */
  #sweep(): void {
    const oldest = performance.now() - this.#queueTimeoutMs;
    for (
      let waiter = this.#waiting.peek();
      waiter !== undefined && waiter.at <= oldest;
      waiter = this.#waiting.peek()
    ) {
      this.#waiting.shift();
      // While no connection can be made, the wait was for one to open: that failure is the answer.
      waiter.reject(
        this.#failing ??
          connectionError('QUEUE_TIMEOUT', `no database connection was free within ${this.#queueTimeoutMs} ms`),
      );
    }
    if (this.#waiting.length === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }

  /** No connection could be made: refuses what waits since before `since`; true if some wait still. */
  #refuseAll(error: unknown, since: number): boolean {
    this.#failing = error;
    for (let waiter = this.#waiting.peek(); waiter !== undefined && waiter.at < since; waiter = this.#waiting.peek()) {
      this.#waiting.shift();
      waiter.reject(error);
    }
    return this.#waiting.length > 0;
  }

  /** `slot` is free (opened, or released by a transaction): the statements waiting go there, in order. */
  #serve(slot: Slot): void {
    while (!slot.reserved && slot.state === 'open' && !slot.retiring) {
      const waiter = this.#waiting.shift();
      if (waiter === undefined) return;
      if (waiter.kind === 'reserve') {
        slot.reserved = true;
        waiter.resolve(slot);
        return;
      }
      waiter.resolve(this.#send(slot, waiter.text, waiter.parameters, waiter.options));
    }
  }

  /** A released connection goes to what waits, else back to plain queries. */
  #handOver(slot: Slot): void {
    slot.reserved = false;
    if (slot.retiring) this.#retireIfIdle(slot);
    else this.#serve(slot);
  }

  /**
   * The connection for a plain query: the first free one with room in its pipeline, so that
   * concurrent queries share few connections and travel in few writes; past `pipelineDepth`
   * queries in flight on every free connection, the least loaded one.
   */
  #forQuery(): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.#slots) {
      if (slot.state !== 'open' || slot.reserved || slot.retiring) continue;
      if (slot.inflight < this.#pipelineDepth) return slot;
      if (best === undefined || slot.inflight < best.inflight) best = slot;
    }
    return best;
  }

  /** The connection for a transaction: the least loaded free one (ideally idle, so it starts at once). */
  #leastLoaded(): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.#slots) {
      if (slot.state !== 'open' || slot.reserved || slot.retiring) continue;
      if (best === undefined || slot.inflight < best.inflight) best = slot;
      if (best.inflight === 0) break;
    }
    return best;
  }
}

/** What a promise is rejected with: the error itself, or one that carries a non-error as its cause. */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error), { cause: error });
}

/** `promise`, or a CONNECT_TIMEOUT rejection after `ms` (a connection that never opens nor fails). */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(connectionError('CONNECT_TIMEOUT', `no connection within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** A FIFO queue whose push and shift are O(1) however long it is used without draining. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  /** Slots held, consumed ones included (for tests: it stays within twice the length). */
  get capacity(): number {
    return this.#items.length;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  peek(): T | undefined {
    return this.#head === this.#items.length ? undefined : this.#items[this.#head];
  }

  shift(): T | undefined {
    if (this.#head === this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    // Compact once the consumed prefix is half the array: amortised O(1), bounded memory.
    if (this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
}
