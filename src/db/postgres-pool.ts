// A pool of single-connection postgres.js clients, dispatched here rather than by postgres.js.
//
// Why not one postgres.js client with `max: N`: in postgres.js 3.4, with more than one
// connection, the queue of busy connections is shifted and pushed once per query and keeps
// a hole per shift until it drains completely, which never happens under continuous load;
// every busy → open move is then an indexOf over that ever-growing array, so each query costs
// O(queries so far) and throughput decays for as long as the load lasts (porsager/postgres#747;
// docs/benchmark-log.md has the profile). With `max: 1` that queue holds at most one connection
// and drains on every query, so it stays O(1); this pool gives each connection its own client
// and keeps the choice of connection here, in O(N) for N connections.
//
// Plain queries go to the first connection that no transaction holds and that has room in its
// pipeline (32 in flight), where postgres.js prepares and pipelines them: concurrent reads
// share few connections and few writes, and the others stay free for transactions. A heavy
// write outside a transaction (placing an order) goes to the least loaded free connection
// instead, so that writes spread over the backends and never sit in the reads' pipeline. A
// transaction reserves a whole connection from BEGIN to COMMIT/ROLLBACK; once it is chosen, no
// new plain query is sent there, so the reservation waits only for the queries already in
// flight (a busy pipelined connection would otherwise never drain). When every connection is
// held, transactions wait here in FIFO order and plain queries wait in postgres.js behind the
// next release.
import postgres, {
  type Options,
  type PendingQuery,
  type ReservedSql,
  type Row,
  type RowList,
  type Sql,
} from 'postgres';
import { inlineParameters } from './inline-parameters.js';
import { callText, FUNCTION_PREFIX, makeStatementFunction } from './statement-functions.js';
import { isConnectionError } from './pg-errors.js';

export function connectionLost(): Error {
  return Object.assign(new Error('The connection closed during a transaction'), { code: 'CONNECTION_CLOSED' });
}

/** SQLSTATEs of a session the server ended: the statement did not run. */
const SESSION_ENDED = new Set(['57P01', '57P02', '57P03']);
const CONNECTION_LOST = new Set(['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE']);

/** A statement that failed with its connection and had no effect, or none that matters. */
export function canRetry(text: string, error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code ?? '';
  if (SESSION_ENDED.has(code)) return true;
  return CONNECTION_LOST.has(code) && /^\s*(select|begin)\b/i.test(text);
}

export interface PoolClient {
  readonly sql: Sql;
  /** Called when this client's connection closes (the reservation holding it, if any, is lost). */
  onClose?: (() => void) | undefined;
  /** Plain queries sent and not yet answered. */
  inflight: number;
  /** A transaction holds (or is about to hold) this connection. */
  reserved: boolean;
}

export interface Reservation {
  readonly sql: ReservedSql;
  /**
   * Rejects if the connection closes while reserved (the server ended the session: an idle
   * transaction, a restart). postgres.js leaves a reserved query pending forever then, so every
   * reserved statement races this.
   */
  readonly lost: Promise<never>;
  /** True once the connection has closed: nothing may be sent on it, nor may it be released. */
  readonly isLost: () => boolean;
  release(): void;
}

/** How long making one statement function may take before the statement stays text for now. */
const MAKE_TIMEOUT_MS = 10_000;

export class PostgresPool {
  readonly clients: readonly PoolClient[];
  /** Where a query goes when every connection is reserved: it waits behind the transaction. */
  readonly #fallback: PoolClient;
  readonly #waiting = new Fifo<(client: PoolClient) => void>();

  readonly #pipelineDepth: number;
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
  /**
   * A connection of its own for making them, one after another: a statement's description
   * (Parse, Describe) pipelined among another client's simple queries leaves PgBouncer 1.18
   * with answers for a server connection it has already unlinked, and the client waiting.
   */
  readonly #maker: () => Sql;
  #making: Promise<void> = Promise.resolve();
  /** Statements sent so far (the db_queries_total metric reads it). */
  statements = 0;
  /** When a plain statement last got its answer, and when one last lost its connection (performance.now()). */
  #answeredAt = Number.NEGATIVE_INFINITY;
  #lostAt = Number.NEGATIVE_INFINITY;

  /** `pipelineDepth`: plain queries in flight on one connection before the next one is used. */
  constructor(
    url: string,
    size: number,
    options: Options<Record<string, postgres.PostgresType>>,
    { pipelineDepth = 32, inline = false }: { pipelineDepth?: number; inline?: boolean } = {},
  ) {
    if (!(size >= 1)) throw new RangeError(`pool size must be at least 1, not ${size}`);
    this.#pipelineDepth = pipelineDepth;
    this.inline = inline;
    this.prepare = options.prepare !== false;
    this.clients = Array.from({ length: size }, () => {
      const client: PoolClient = { sql: undefined as unknown as Sql, inflight: 0, reserved: false };
      (client as { sql: Sql }).sql = postgres(url, {
        ...options,
        max: 1,
        onclose: (id) => {
          this.#lostAt = performance.now();
          options.onclose?.(id);
          client.onClose?.();
        },
      });
      return client;
    });
    const [first] = this.clients;
    if (first === undefined) throw new RangeError('pool has no client');
    this.#fallback = first;
    this.#maker = () =>
      postgres(url, { ...options, max: 1, prepare: false, idle_timeout: 1, onclose: undefined } as typeof options);
  }

  /**
   * Runs one statement, prepared and pipelined: on the first free connection with room in its
   * pipeline, or with `spread` on the least loaded free one. A write that locks rows and runs far
   * longer than a read (placing an order) is sent with `spread`: in the reads' pipeline it would
   * hold up every read behind it, wait there for its locks while they wait, and put all writes on
   * one backend (one core of PostgreSQL's). After the server restarts, each client's old
   * connection fails the first statement sent on it; a statement that cannot have taken effect
   * is then sent once more, on the fresh connection: one the server refused because it ended
   * the session (57P01-3), or a read.
   */
  query(text: string, parameters: readonly unknown[], options: { spread?: boolean } = {}): Promise<RowList<Row[]>> {
    return this.#query(text, parameters, options.spread === true).catch(async (error: unknown) => {
      // A statement function dropped under the running service: the text again, and a new one.
      if (this.#isMissingFunction(error)) this.#functions.delete(text);
      else if (!canRetry(text, error)) throw error;
      // A reset's error comes a turn before the socket's close: sent now, the second try would
      // go to the same closing connection. After a timer, postgres.js has seen the close.
      else await new Promise((resolve) => setTimeout(resolve, 0));
      return this.#query(text, parameters, options.spread === true);
    });
  }

  /**
   * `text` is a hot statement (a prepared query, db/prepared.ts): behind a pooler in transaction
   * mode its function is made in the background, and once made it is sent as a call of it.
   */
  hot(text: string): void {
    if (!this.inline || this.#functions.has(text)) return;
    this.#functions.set(text, null);
    this.#making = this.#making.then(async () => {
      const sql = this.#maker();
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
        await sql.end({ timeout: 0 }).catch(() => {});
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

  #query(text: string, parameters: readonly unknown[], spread: boolean): Promise<RowList<Row[]>> {
    return this.#send((spread ? this.#leastLoaded() : this.#forQuery()) ?? this.#fallback, text, parameters);
  }

  /** One prepared statement on `client`, counted in its pipeline while in flight. */
  #send(client: PoolClient, text: string, parameters: readonly unknown[]): Promise<RowList<Row[]>> {
    // Built first: a value that cannot be written into the text (a NUL) fails it here, counting nothing.
    let pending: PendingQuery<Row[]>;
    try {
      pending = this.statement(client.sql, text, parameters);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    client.inflight++;
    this.statements++;
    return pending.then(
      (rows) => {
        client.inflight--;
        this.#answeredAt = performance.now();
        return rows;
      },
      (error: unknown) => {
        client.inflight--;
        if (isConnectionError(error)) this.#lostAt = performance.now();
        throw error;
      },
    );
  }

  /**
   * The server answered a statement within the last `withinMs`, and none has lost its connection
   * since: it is reachable now, as surely as one more `select 1` would tell (readiness).
   */
  answeredWithin(withinMs: number): boolean {
    return this.#answeredAt > this.#lostAt && performance.now() - this.#answeredAt < withinMs;
  }

  /** One statement on `sql` (a pooled or a reserved connection), as this pool sends them. */
  statement(sql: Sql | ReservedSql, text: string, parameters: readonly unknown[]): PendingQuery<Row[]> {
    if (this.inline) {
      const name = this.#functions.get(text);
      return sql
        .unsafe(name == null ? inlineParameters(text, parameters) : callText(name, parameters))
        .simple() as unknown as PendingQuery<Row[]>;
    }
    return sql.unsafe(text, parameters as never[], { prepare: this.prepare });
  }

  /** A connection of its own until release(): for a transaction. */
  async reserve(): Promise<Reservation> {
    const client = this.#leastLoaded() ?? (await new Promise<PoolClient>((resolve) => this.#waiting.push(resolve)));
    client.reserved = true;
    let sql: ReservedSql;
    try {
      sql = await client.sql.reserve();
    } catch (error) {
      this.#handOver(client);
      throw error;
    }
    let released = false;
    let isLost = false;
    const lost = new Promise<never>((_, reject) => {
      client.onClose = () => {
        isLost = true;
        reject(connectionLost());
      };
    });
    lost.catch(() => {}); // observed by whoever races it
    return {
      sql,
      lost,
      isLost: () => isLost,
      release: () => {
        if (released) return;
        released = true;
        client.onClose = undefined;
        // postgres.js has already put a closed connection back among its closed ones (to
        // reconnect on the next query); releasing it as well would mark it open while dead.
        if (!isLost) sql.release();
        this.#handOver(client);
      },
    };
  }

  /**
   * Runs one statement on every connection, together, prepared as plain queries are (warm-up,
   * tests): each connection's rows, in pool order. A connection a transaction holds runs it after.
   */
  onEveryConnection(text: string, parameters: readonly unknown[]): Promise<RowList<Row[]>[]> {
    return Promise.all(this.clients.map((client) => this.#send(client, text, parameters)));
  }

  /** The client a cursor or LISTEN may use: the least loaded one. */
  anyClient(): Sql {
    return (this.#leastLoaded() ?? this.#fallback).sql;
  }

  async end(options: { timeout?: number } = {}): Promise<void> {
    await Promise.all(this.clients.map((c) => c.sql.end(options)));
  }

  /** A released connection goes to the next waiting transaction, else back to plain queries. */
  #handOver(client: PoolClient): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(client);
    else client.reserved = false;
  }

  /**
   * The client for a plain query: the first free one with room in its pipeline, so that
   * concurrent queries share few connections and travel in few writes; past `pipelineDepth`
   * queries in flight on every free connection, the least loaded one.
   */
  #forQuery(): PoolClient | undefined {
    let best: PoolClient | undefined;
    for (const client of this.clients) {
      if (client.reserved) continue;
      if (client.inflight < this.#pipelineDepth) return client;
      if (best === undefined || client.inflight < best.inflight) best = client;
    }
    return best;
  }

  /** The client for a transaction: the least loaded free one (ideally idle, so it starts at once). */
  #leastLoaded(): PoolClient | undefined {
    let best: PoolClient | undefined;
    for (const client of this.clients) {
      if (client.reserved) continue;
      if (best === undefined || client.inflight < best.inflight) best = client;
      if (best.inflight === 0) break;
    }
    return best;
  }
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
