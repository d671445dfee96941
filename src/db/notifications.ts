// Wake-ups between instances over PostgreSQL's LISTEN/NOTIFY, on one connection of its own on
// DATABASE_DIRECT_URL (never through a transaction pooler, which cannot carry LISTEN), on the
// primary only, found again after a failover. An instance notifies after its writes have
// committed and answered, at most every `spacingMs` with a trailing one so that the last write
// is never left out; never inside a write's transaction, where a NOTIFY holds a cluster-wide
// lock at commit and so serialises every commit (measured: −35% POST /api/v1/orders with one
// webhook subscription). Each payload names its instance, so that an instance ignores its own.
// The embedded engine is one process, which needs none of this: there is no channel.
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import type { Config } from '../config.js';
import { reconnection } from './create-database.js';

export interface Notifications {
  /** Tells the other instances, soon (spaced; a failure is logged, never thrown). */
  notify(): void;
  /** Calls `onOther` at each notification from another instance; resolves once listening. */
  listen(onOther: () => void): Promise<void>;
  end(): Promise<void>;
}

interface Log {
  warn(fields: object, message: string): void;
}

/** The channel's notifications, or undefined on the embedded engine. */
export function notificationsOf(
  database: Config['database'],
  channel: string,
  log: Log,
  { spacingMs = 50 }: { spacingMs?: number } = {},
): Notifications | undefined {
  if (database.kind !== 'postgres') return undefined;
  const sql = postgres(database.directUrl, {
    max: 1,
    onnotice: () => {},
    ...reconnection(database.directUrl),
    connection: { application_name: 'resource-api-listen' },
  });
  const instance = randomUUID();
  let last = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | undefined;
  const send = () => {
    timer = undefined;
    last = performance.now();
    sql.notify(channel, instance).catch((error: unknown) => {
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
    listen: async (onOther) => {
      await sql
        .listen(channel, (from) => {
          if (from !== instance) onOther();
        })
        .catch((error: unknown) => {
          log.warn({ err: error }, `LISTEN ${channel} failed: this instance finds out by polling`);
        });
    },
    end: async () => {
      if (timer !== undefined) clearTimeout(timer);
      await sql.end({ timeout: 1 });
    },
  };
}
