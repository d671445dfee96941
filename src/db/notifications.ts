// Wake-ups between instances over PostgreSQL's LISTEN/NOTIFY, on one connection of its own on
// DATABASE_DIRECT_URL (never through a transaction pooler, which cannot carry LISTEN), on the
// primary only, found again after a failover. An instance notifies after its writes have
// committed and answered, at most every `spacingMs` with a trailing one so that the last write
// is never left out; never inside a write's transaction, where a NOTIFY holds a cluster-wide
// lock at commit and so serialises every commit (docs/benchmark-log.md has what that cost).
// Each payload names its instance, so that an instance ignores its own.
// The embedded engine is one process, which needs none of this: there is no channel.
import { randomUUID } from 'node:crypto';
import type { Sql } from 'postgres';
import type { Config } from '../config/config.js';
import { connectionTarget, type Endpoint } from './connection-target.js';
import { reconnection } from './create-database.js';
import { singleUseClient, type DriverOptions } from './driver-client.js';
import { reconnectDelaySeconds } from './reconnect-delay.js';
import { openSession, sessionDeadlineMs, withDeadline } from './session.js';

export interface Notifications {
  /** Tells the other instances, soon (spaced; a failure is logged, never thrown). */
  notify(): void;
  /**
   * Calls `onOther` at each notification from another instance; resolves once listening, or once
   * a first round of the hosts failed (logged: meanwhile the instance finds out by polling).
   */
  listen(onOther: () => void): Promise<void>;
  end(): Promise<void>;
}

interface Log {
  warn(fields: object, message: string): void;
}

const noop = (): void => {};

/**
 * The channel's notifications, or undefined on the embedded engine. The connection's life is the
 * service's, as the pool's (pool-connection.ts): it opens the same way (session.ts, with the same
 * deadline on every step, LISTEN included), is a client per connection thrown away when it dies,
 * and the next one LISTENs again after a wait of at most a second (reconnect-delay.ts), on the
 * host that is the primary.
 */
export function notificationsOf(
  database: Config['database'],
  channel: string,
  log: Log,
  { spacingMs = 50 }: { spacingMs?: number } = {},
): Notifications | undefined {
  if (database.kind !== 'postgres') return undefined;
  const target = connectionTarget(database.directUrl);
  const instance = randomUUID();
  const listenText = `listen "${channel.replaceAll('"', '""')}"`;
  /** The listening connection's client, while it lives. */
  let sql: Sql | undefined;
  let onOther: () => void = noop;
  /** LISTEN on each connection: once listen() was called (an instance that only notifies does not). */
  let listening = false;
  const lifecycle = { ended: false };
  let preferred = 0;
  let retries = 0;
  let reopen: NodeJS.Timeout | undefined;
  let started: Promise<void> | undefined;

  const options: DriverOptions = {
    onnotice: noop,
    ...reconnection(),
    connection: { application_name: 'resource-api-listen' },
    // postgres.js calls it for each NotificationResponse on this connection (not in its types).
    ...({
      onnotify: (name: string, from: string) => {
        if (name === channel && from !== instance) onOther();
      },
    } as object),
  };
  /** Clients whose connection has died (or was given up on): never the listening one again. */
  const dead = new WeakSet<Sql>();
  const client = (endpoint: Endpoint): Sql => {
    const made: Sql = singleUseClient(target.driverUrl, endpoint, options, {
      onDeath: () => {
        if (dead.has(made)) return;
        dead.add(made);
        if (sql !== made) return;
        sql = undefined;
        void made.end({ timeout: 0 }).catch(noop);
        schedule(0);
      },
    });
    return made;
  };

  /** One round of the hosts: true once one listens. */
  const round = async (): Promise<{ listening: boolean; error?: unknown }> => {
    const opened = await openSession(target, preferred, {
      client,
      deadlineMs: sessionDeadlineMs(options),
      prepare: listening ? (session) => session.unsafe(listenText).simple() : undefined,
      wanted: (session) => !dead.has(session) && !lifecycle.ended,
    });
    if (opened.sql === undefined) return { listening: false, error: opened.failure };
    sql = opened.sql;
    preferred = opened.index;
    retries = 0;
    return { listening: true };
  };

  const openRound = async (): Promise<{ listening: boolean; error?: unknown }> => {
    const result = await round();
    if (!result.listening && !lifecycle.ended) schedule(++retries);
    return result;
  };

  function schedule(failed: number): void {
    if (lifecycle.ended) return;
    reopen = setTimeout(
      () => {
        reopen = undefined;
        void openRound();
      },
      reconnectDelaySeconds(failed) * 1000,
    );
    reopen.unref();
  }

  let last = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | undefined;
  /** The connection, opened on first use (a first round of the hosts, whatever its outcome). */
  const connection = async (): Promise<Sql | undefined> => {
    started ??= openRound().then(({ listening: ok, error }) => {
      if (!ok && !lifecycle.ended)
        log.warn(
          { err: error },
          `LISTEN/NOTIFY ${channel}: no connection yet; instances find out by polling meanwhile`,
        );
    });
    if (sql === undefined) await started;
    return sql;
  };
  const send = () => {
    timer = undefined;
    last = performance.now();
    const sent = connection().then((client) => {
      if (client === undefined) throw new Error('no connection to the database');
      return client.unsafe('select pg_notify($1, $2)', [channel, instance]);
    });
    sent.catch((error: unknown) => {
      log.warn({ err: error }, `NOTIFY ${channel} failed: the other instances find out by polling`);
    });
  };
  return {
    notify: () => {
      if (timer !== undefined) return;
      const wait = last + spacingMs - performance.now();
      if (wait <= 0) send();
      else timer = setTimeout(send, wait);
    },
    listen: async (callback) => {
      onOther = callback;
      listening = true;
      // Already open to notify: LISTEN there now (a new connection LISTENs as it opens).
      const open = sql;
      if (open !== undefined)
        await withDeadline(open.unsafe(listenText).simple(), sessionDeadlineMs(options)).catch(noop);
      await connection();
    },
    end: async () => {
      lifecycle.ended = true;
      if (timer !== undefined) clearTimeout(timer);
      if (reopen !== undefined) clearTimeout(reopen);
      const client = sql;
      sql = undefined;
      await client?.end({ timeout: 1 }).catch(noop);
    },
  };
}
