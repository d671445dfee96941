// The wake-ups between instances (src/db/notifications.ts): LISTEN on a connection of its own,
// kept through the loss of that connection and an outage of the server.
//
// The LISTEN connection's life is the service's (notifications.ts): when it dies, a new client
// LISTENs again after a wait of at most a second (reconnect-delay.ts). postgres.js's own wait
// between attempts (3^n / 100 s, up to 20 s) left the instance deaf for up to 20 s after an
// outage of a few seconds (the dispatcher polls meanwhile). The test holds a TCP front of its own between the listener and the suite's
// PostgreSQL, to take the server away (connections dropped, then refused) and give it back on
// the same address.
import { createServer, type Server, type Socket } from 'node:net';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/config.js';
import { notificationsOf } from '../../src/db/notifications.js';
import { closeFront, listening, upstreamFor } from '../support/tcp-front.js';
import { engine, testPostgres } from '../support/test-app.js';
import { until } from '../support/until.js';

const url = testPostgres.directUrl;
const channel = 'resource_api_notifications_test';

/** A forwarder on loopback that can go away (`down`) and come back on the same port (`up`). */
async function frontOfPostgres(): Promise<{ url: string; down: () => Promise<void>; up: () => Promise<string> }> {
  const target = new URL(url!);
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const up = async () => {
    server = createServer((client) => client.pipe(upstreamFor(client, target, sockets)).pipe(client));
    const front = await listening(server, target, port);
    port = Number(new URL(front).port);
    return front;
  };
  return { url: await up(), down: () => closeFront(server!, sockets), up };
}

/**
 * A forwarder that lets each session open (startup, authentication) and then never answers: the
 * first statement a client sends, and everything after it, goes nowhere; the socket stays open.
 */
async function silentAfterStartup(): Promise<{ url: string; close: () => Promise<void> }> {
  const target = new URL(url!);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = upstreamFor(client, target, sockets);
    let silent = false;
    upstream.on('data', (chunk: Buffer) => {
      if (!silent) client.write(chunk);
    });
    client.on('data', (chunk: Buffer) => {
      // A simple query ('Q'), or an extended one's Parse ('P'): the session is open.
      if (chunk[0] === 0x51 || chunk[0] === 0x50) silent = true;
      if (!silent) upstream.write(chunk);
    });
  });
  return { url: await listening(server, target), close: () => closeFront(server, sockets) };
}

function databaseAt(directUrl: string): Config['database'] {
  return { kind: 'postgres', url: directUrl, directUrl } as Config['database'];
}

describe.runIf(engine === 'postgres' && url !== undefined)('LISTEN between instances', () => {
  it('hears the other instances again after its server was away, refused, and came back', async () => {
    const front = await frontOfPostgres();
    const warnings: string[] = [];
    const log = { warn: (_fields: object, message: string) => void warnings.push(message) };
    const notifications = notificationsOf(databaseAt(front.url), channel, log)!;
    const other = postgres(url!, { max: 1, onnotice: () => {} });
    let heard = 0;
    try {
      await notifications.listen(() => heard++);
      await other.notify(channel, 'another instance');
      await until('a notification', () => heard > 0, 5000);

      // The server goes away: the connection drops, and for a while connections are refused.
      await front.down();
      // Longer than connect_timeout (5 s), as a failover or a restart can be.
      await new Promise((resolve) => setTimeout(resolve, 6000));
      await front.up();

      // Back on the same address: the instance hears again within a couple of seconds.
      const before = heard;
      const timer = setInterval(() => void other.notify(channel, 'another instance').catch(() => {}), 100);
      try {
        await until('a notification after the outage', () => heard > before, 4000);
      } finally {
        clearInterval(timer);
      }
      expect(warnings).toEqual([]);
    } finally {
      await notifications.end();
      await other.end({ timeout: 1 });
      await front.down().catch(() => {});
    }
  }, 20_000);

  // Start-up waits for listen(): a session whose first statement is never answered must not hold
  // it (the pool's opening has the same deadline: src/db/session.ts).
  it('gives up on a session that opens and then never answers, within the connect time-out, and says so', async () => {
    const front = await silentAfterStartup();
    const warnings: string[] = [];
    const notifications = notificationsOf(databaseAt(front.url), channel, {
      warn: (_fields: object, message: string) => void warnings.push(message),
    })!;
    try {
      const started = performance.now();
      const listened = await Promise.race([
        notifications.listen(() => {}).then(() => 'returned'),
        new Promise((resolve) => setTimeout(resolve, 10_000, 'still waiting after 10 s')),
      ]);
      expect(listened).toBe('returned');
      // connect_timeout (5 s) and a second.
      expect(performance.now() - started).toBeLessThan(7000);
      expect(warnings).toEqual([expect.stringContaining('no connection yet')]);
    } finally {
      await notifications.end();
      await front.close();
    }
  }, 20_000);

  it('tells the other instances and not itself', async () => {
    const one = notificationsOf(databaseAt(url!), channel, { warn: () => {} }, { spacingMs: 0 })!;
    const another = notificationsOf(databaseAt(url!), channel, { warn: () => {} }, { spacingMs: 0 })!;
    let heardByOne = 0;
    let heardByAnother = 0;
    try {
      await one.listen(() => heardByOne++);
      await another.listen(() => heardByAnother++);
      one.notify();
      // The other instance hears it: notify() did send.
      await until('the other instance hears', () => heardByAnother > 0, 5000);
      // Its own connection had it delivered too, well before now: it was ignored.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(heardByOne).toBe(0);
      expect(heardByAnother).toBe(1);
    } finally {
      await one.end();
      await another.end();
    }
  });
});
