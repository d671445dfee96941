// Opening a session: the one way the pool's connections (pool-connection.ts) and the LISTEN
// session (notifications.ts) open theirs. A round of the URL's hosts, from the one that served
// last: each gets a client of its own (driver-client.ts) and is asked what it is (SESSION_STATE),
// and the first whose state the URL accepts (the primary, among several hosts) is the session.
// Every step has a deadline: a host that accepts the connection and then never answers (a frozen
// machine, a path whose sockets stay open) fails its step, and the round goes on.
import type { Sql } from 'postgres';
import { accepts, SESSION_STATE, type ConnectionTarget, type Endpoint } from './connection-target.js';
import { connectionError, type DriverOptions } from './driver-client.js';

/** The connect time-out's seconds (postgres.js's default 30) and one more, in milliseconds. */
export function sessionDeadlineMs(options: DriverOptions): number {
  return ((Number(options.connect_timeout) || 30) + 1) * 1000;
}

export interface SessionOptions {
  /** A client of one connection to `endpoint`. */
  client: (endpoint: Endpoint) => Sql;
  /** How long each step may take (sessionDeadlineMs). */
  deadlineMs: number;
  /** What the session runs before it is used (LISTEN), under the same deadline. */
  prepare?: ((sql: Sql) => Promise<unknown>) | undefined;
  /** False once `sql`'s session is no longer wanted (the owner ended, or replaced it). */
  wanted: (sql: Sql) => boolean;
  /** Each host that failed, with why (the connection-errors metric). */
  onFailure?: (error: unknown) => void;
}

export type Opened = { sql: Sql; index: number } | { sql: undefined; failure: unknown };

const noop = (): void => {};

/** One round of `target`'s hosts from `from`: the first session they accept, or the last failure. */
export async function openSession(target: ConnectionTarget, from: number, options: SessionOptions): Promise<Opened> {
  const { endpoints, attrs } = target;
  let failure: unknown = connectionError('CONNECTION_CLOSED', 'no host could be reached');
  for (let k = 0; k < endpoints.length; k++) {
    const index = (from + k) % endpoints.length;
    const endpoint = endpoints[index] as Endpoint;
    const sql = options.client(endpoint);
    if (!options.wanted(sql)) return { sql: undefined, failure };
    try {
      const [state] = (await withDeadline(sql.unsafe(SESSION_STATE).simple(), options.deadlineMs)) as unknown as (
        { standby: boolean; read_only: string } | undefined
      )[];
      if (state !== undefined && accepts(attrs, state)) {
        if (options.prepare !== undefined && options.wanted(sql))
          await withDeadline(options.prepare(sql), options.deadlineMs);
        if (options.wanted(sql)) return { sql, index };
      } else {
        failure = connectionError('25006', `${endpoint.host}:${endpoint.port} is not a ${attrs} server`);
        options.onFailure?.(failure);
      }
    } catch (error) {
      failure = error;
      options.onFailure?.(error);
    }
    void sql.end({ timeout: 0 }).catch(noop);
    if (!options.wanted(sql)) return { sql: undefined, failure };
  }
  return { sql: undefined, failure };
}

/** `promise`, or a CONNECT_TIMEOUT rejection after `ms` (a step that never ends nor fails). */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(connectionError('CONNECT_TIMEOUT', `no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
