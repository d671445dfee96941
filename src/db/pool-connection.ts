// One connection of the pool, across its lives (docs/architecture.md, "How a connection lives
// and dies"). A life opens with a round of the hosts (session.ts) and is one postgres.js client
// (driver-client.ts), thrown away whole when it ends: its socket closed or failed, its server
// ended it, it did not answer in time, or it was retired (past its lifetime, or it answered that
// it is read-only) once nothing was in flight on it. Every statement sent on a life settles
// when the life ends, and the next life opens after a short wait (reconnect-delay.ts).
import type { PendingQuery, Row, Sql } from 'postgres';
import type { ConnectionTarget } from './connection-target.js';
import { connectionError, connectionLost, singleUseClient, type Dial, type DriverOptions } from './driver-client.js';
import { openSession, sessionDeadlineMs } from './session.js';

export type State = 'down' | 'opening' | 'open';

/** What a connection tells its pool. */
export interface Owner {
  readonly target: ConnectionTarget;
  readonly driverOptions: DriverOptions;
  readonly dial: Dial | undefined;
  /** The host to start a round of the hosts at (the one the last connection opened on). */
  readonly preferred: number;
  isEnded(): boolean;
  /** A life opened on host `index`: what waits may be served. */
  opened(connection: PoolConnection, index: number): void;
  /**
   * A round of the hosts failed (it began at `startedAt`; `retries` rounds in a row now): the
   * delay before the next, in seconds.
   */
  failed(connection: PoolConnection, error: unknown, startedAt: number, retries: number): number;
  /** A life ended while open (not retired): `error` is what its statements were rejected with. */
  lost(connection: PoolConnection, error: Error): void;
  /** One host of a round could not be opened (the connection-errors metric). */
  openFailed(error: unknown): void;
  /** Seconds before the next life after one was lost. */
  backoff(retries: number): number;
  /** A life's length before it is retired (seconds). */
  lifetime(): number;
}

const noop = (): void => {};

export class PoolConnection {
  /** The client of the current life, while opening or open. */
  sql: Sql | undefined;
  state: State = 'down';
  /** Plain statements sent and not yet answered. */
  inflight = 0;
  /** A transaction holds (or is about to hold) this connection. */
  reserved = false;
  /** No new statement: replaced once nothing is in flight (past its lifetime, or read-only). */
  retiring = false;
  /** When the current life opened (performance.now()). */
  openedAt = 0;
  /**
   * When the connection last showed it was alive (performance.now()): it answered a statement,
   * or was sent one while nothing else was in flight.
   */
  heardAt = 0;
  /** The reservation holding it learns of the connection's end here. */
  onClose: (() => void) | undefined;
  /** Every statement sent on the current life and not yet settled. */
  readonly #sent = new Set<PendingQuery<Row[]>>();
  /** Failed rounds of the hosts since the connection was last open. */
  #retries = 0;
  #reopen: NodeJS.Timeout | undefined;
  #lifeTimer: NodeJS.Timeout | undefined;
  /** Waiting for this connection to open (whenOpen). */
  #opened: { resolve: () => void; reject: (error: unknown) => void }[] = [];

  constructor(private readonly owner: Owner) {}

  /** Statements on it still unanswered. */
  get unanswered(): number {
    return this.#sent.size;
  }

  /** Down and waiting out a backoff before its next round of the hosts. */
  get backingOff(): boolean {
    return this.state === 'down' && this.#reopen !== undefined;
  }

  /** Opens the next life now: a round of the hosts, from the one that served last. */
  open(): void {
    clearTimeout(this.#reopen);
    this.#reopen = undefined;
    if (this.owner.isEnded() || this.state !== 'down') return;
    this.state = 'opening';
    void this.#round();
  }

  async #round(): Promise<void> {
    const { owner } = this;
    const startedAt = performance.now();
    const opened = await openSession(owner.target, owner.preferred, {
      client: (endpoint) => {
        const sql: Sql = singleUseClient(owner.target.driverUrl, endpoint, owner.driverOptions, {
          dial: owner.dial,
          onDeath: () => this.died(sql),
        });
        this.sql = sql;
        return sql;
      },
      deadlineMs: sessionDeadlineMs(owner.driverOptions),
      wanted: (sql) => this.sql === sql && !owner.isEnded(),
      onFailure: (error) => owner.openFailed(error),
    });
    if (owner.isEnded()) return;
    if (opened.sql !== undefined) {
      this.#began(opened.index);
      return;
    }
    this.sql = undefined;
    this.state = 'down';
    this.#retries++;
    for (const waiter of this.#opened.splice(0)) waiter.reject(opened.failure);
    this.#reopenAfter(owner.failed(this, opened.failure, startedAt, this.#retries));
  }

  #began(index: number): void {
    this.state = 'open';
    this.openedAt = performance.now();
    this.heardAt = this.openedAt;
    this.#retries = 0;
    this.retiring = false;
    this.#lifeTimer = setTimeout(() => this.retire(), this.owner.lifetime() * 1000).unref();
    for (const waiter of this.#opened.splice(0)) waiter.resolve();
    this.owner.opened(this, index);
  }

  /** Opens after `seconds` (at once if `open()` is called meanwhile). */
  #reopenAfter(seconds: number): void {
    clearTimeout(this.#reopen);
    this.#reopen = setTimeout(() => this.open(), seconds * 1000).unref();
  }

  /** Resolves once open (opening it if it is down and not backing off). */
  whenOpen(): Promise<void> {
    if (this.state === 'open') return Promise.resolve();
    if (this.owner.isEnded()) return Promise.reject(connectionError('CONNECTION_ENDED', 'The pool was ended'));
    if (this.state === 'down' && this.#reopen === undefined) this.open();
    return new Promise((resolve, reject) => this.#opened.push({ resolve, reject }));
  }

  /**
   * `pending` was sent on the current life: tracked until `settled` (`counted`: a plain
   * statement, in the pipeline's count). What its failure means is the pool's.
   */
  sent(pending: PendingQuery<Row[]>, counted: boolean): void {
    if (this.#sent.size === 0) this.heardAt = performance.now();
    if (counted) this.inflight++;
    this.#sent.add(pending);
  }

  /** `pending` (sent) has its answer, or failed: the connection was heard from. */
  settled(pending: PendingQuery<Row[]>, counted: boolean, now = performance.now()): void {
    if (counted) this.inflight--;
    this.#sent.delete(pending);
    this.heardAt = now;
  }

  /**
   * `sql`'s life is over (its socket closed or failed, or its server ended it): every statement
   * on it settles now, a reservation holding it learns of it, and the next life opens after a
   * short wait. Nothing when `sql` is not the current life, or is still opening (its round goes on).
   */
  died(sql: Sql, error: Error = connectionLost()): void {
    if (this.sql !== sql || this.state !== 'open') return;
    this.#close(error);
    this.owner.lost(this, error);
    this.#reopenAfter(this.owner.backoff(0));
  }

  /** Statements sent `silenceMs` ago and more, and nothing heard since: the life is ended. */
  isSilent(now: number, silenceMs: number): boolean {
    return this.state === 'open' && this.#sent.size > 0 && now - this.heardAt > silenceMs;
  }

  /** No new statement; replaced once nothing is in flight. */
  retire(): void {
    this.retiring = true;
    this.retireIfIdle();
  }

  /** A retiring connection with nothing in flight and no transaction: replaced at once. */
  retireIfIdle(): void {
    if (!this.retiring || this.state !== 'open' || this.#sent.size > 0 || this.reserved || this.owner.isEnded()) return;
    this.#close(connectionLost());
    this.open();
  }

  #close(error: Error): void {
    const { sql } = this;
    this.sql = undefined;
    this.state = 'down';
    this.retiring = false;
    clearTimeout(this.#lifeTimer);
    this.#lifeTimer = undefined;
    const onClose = this.onClose;
    this.onClose = undefined;
    onClose?.();
    // postgres.js leaves some unsettled (one sent between the socket's error and its close, or
    // queued while it would reconnect): each is rejected here, and its handler runs as usual.
    for (const pending of [...this.#sent]) (pending as unknown as { reject(error: Error): void }).reject(error);
    this.#sent.clear();
    void sql?.end({ timeout: 0 }).catch(noop);
  }

  /** The pool ends: nothing reopens, and the client ends (within `timeout` seconds). */
  end(error: unknown, options: { timeout?: number }): Promise<void> {
    clearTimeout(this.#reopen);
    clearTimeout(this.#lifeTimer);
    for (const waiter of this.#opened.splice(0)) waiter.reject(error);
    const { sql } = this;
    return sql === undefined ? Promise.resolve() : sql.end(options).catch(noop);
  }
}

/**
 * Ends each connection that has had statements in flight and answered none for `silenceMs`: a
 * live server answers every statement within its statement time-out (it cancels the statement
 * then), so the server or the path to it is gone, even if the socket stays open.
 */
export function endSilent(connections: readonly PoolConnection[], silenceMs: number): void {
  const now = performance.now();
  for (const connection of connections) {
    const { sql } = connection;
    if (sql !== undefined && connection.isSilent(now, silenceMs))
      connection.died(sql, connectionError('CONNECTION_UNANSWERED', `no answer within ${silenceMs} ms`));
  }
}

/**
 * A connection was ended for its silence, which began at `since`: the idle ones not heard from
 * since then are likely on the same silent path, and are replaced now (nothing is in flight on
 * them) rather than each hold the next statements sent there for as long.
 */
export function replaceUnheard(connections: readonly PoolConnection[], since: number): void {
  for (const connection of connections) {
    if (
      connection.state === 'open' &&
      !connection.reserved &&
      connection.unanswered === 0 &&
      connection.heardAt <= since
    )
      connection.retire();
  }
}
