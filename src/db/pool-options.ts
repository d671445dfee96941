// The pool's small interface (postgres-pool.ts): how a statement is sent, how a pool is made, a
// transaction's reserved connection, and the state its metrics report.
import type { Row, RowList } from 'postgres';
import type { Dial } from './driver-client.js';

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
  /**
   * How long a connection with statements in flight may go without answering before it is ended
   * (ms): the statement time-out and a margin, since a live server answers each statement
   * within it. None by default.
   */
  answerTimeoutMs?: number;
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
  /** One statement on it; rejected (CONNECTION_CLOSED) if the connection ends before its answer. */
  run(text: string, parameters: readonly unknown[], simple?: boolean): Promise<RowList<Row[]>>;
  /** True once the connection has closed: nothing may be sent on it. */
  isLost(): boolean;
  release(): void;
}

/** The pool's state, as its metrics report it (http/database/pool-metrics.ts). */
export interface PoolMetrics {
  /** Connections open. */
  open: number;
  /** Statements and transactions waiting for a connection. */
  waiting: number;
  /** Statements refused for waiting longer than the queue time-out, so far. */
  queueTimeouts: number;
  /** Connections lost, and sessions that failed to open, so far. */
  connectionErrors: number;
}
