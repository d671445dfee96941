// docs/webhooks.md across processes (PostgreSQL): two instances dispatch from one database; the one
// in the middle of a delivery is killed with SIGKILL; after its lease the other sends that
// delivery again with the same webhook-id, and every event is delivered. The receiver listens
// on 127.0.0.1 only.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { aUserRequest } from '../support/factories.js';
import { runServer, type ServerProcess } from '../support/process.js';
import { databaseEnv, engine, testPostgres } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';

// .ci/run's Node 24 pass sets TEST_DATABASE_URL to the empty string: no PostgreSQL.
// The test's own clients connect directly; the service through the pooler, when one is in front.
const baseUrl = testPostgres.directUrl;

describe.runIf(engine === 'postgres' && baseUrl !== undefined)('webhook delivery across processes', () => {
  const database = `ra_hooks_${randomBytes(4).toString('hex')}`;
  const databaseUrl = baseUrl === undefined ? '' : new URL(database, baseUrl.replace(/\/[^/]*$/, '/')).toString();
  const admin = postgres(baseUrl ?? '', { max: 1, onnotice: () => {} });
  const servers: ServerProcess[] = [];
  const received: { id: string; body: string; answered: boolean }[] = [];
  const hanging: ServerResponse[] = [];
  let firstArrived: () => void = () => {};
  const first = new Promise<void>((resolve) => (firstArrived = resolve));

  // The first request hangs (its sender is then killed); every other one is answered 204.
  const receiver = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const answered = received.length > 0;
      received.push({ id: String(req.headers['webhook-id']), body, answered });
      if (!answered) {
        hanging.push(res);
        firstArrived();
        return;
      }
      res.writeHead(204).end();
    });
  });

  const start = async (env: Record<string, string> = {}) => {
    const server = await runServer({
      ...databaseEnv(database),
      RATE_LIMIT_PER_MINUTE: '0',
      WEBHOOK_DISPATCHER: 'true',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_TIMEOUT_MS: '2000', // lease: 7 s
      WEBHOOK_POLL_MS: '100',
      ...env,
    }).ready;
    servers.push(server);
    return server;
  };

  afterAll(async () => {
    for (const server of servers) if (server.child.exitCode === null) await server.stop('SIGKILL');
    for (const res of hanging) res.destroy();
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
    await admin.unsafe(`drop database if exists ${database} with (force)`);
    await admin.end();
  });

  it('kill -9 in the middle of a delivery loses nothing: the other instance sends it again, same webhook-id', async () => {
    await admin.unsafe(`create database ${database}`);
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const a = await start();
    const call = (server: ServerProcess, path: string, body: unknown) =>
      fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { authorization: ADMIN, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await call(a, '/api/v1/webhook-subscriptions', { url: receiverUrl, events: ['user.*'] })).status).toBe(201);
    for (let i = 0; i < 8; i++) expect((await call(a, '/api/v1/users', aUserRequest())).status).toBe(201);

    await first; // A holds a delivery open…
    const b = await start(); // …while a second instance runs,
    await a.stop('SIGKILL'); // and A dies in the middle of it.

    const db = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    try {
      const events = (await db<{ id: string }[]>`select id::text as id from events order by sequence`).map((e) => e.id);
      expect(events).toHaveLength(8);
      const deadline = Date.now() + 30_000;
      for (;;) {
        const [row] = await db<{ delivered: number }[]>`
          select count(*)::int as delivered from webhook_deliveries where status = 'delivered'`;
        if (row?.delivered === 8) break;
        if (Date.now() > deadline) throw new Error(`only ${String(row?.delivered)} of 8 delivered`);
        await new Promise((r) => setTimeout(r, 200));
      }
      // Every event arrived and was answered; the one A held came again with its own id and
      // the same body; no event ever came under another id.
      const answered = new Set(received.filter((r) => r.answered).map((r) => r.id));
      expect([...answered].sort()).toEqual([...events].sort());
      const held = received[0]!;
      const again = received.filter((r) => r.id === held.id && r.answered);
      expect(again.length).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(again[0]!.body)).toEqual(JSON.parse(held.body));
      for (const r of received) expect(events).toContain(r.id);
      expect(b.child.exitCode).toBeNull();
    } finally {
      await db.end();
    }
  }, 90_000);

  it('wakes the other instances through LISTEN/NOTIFY: a delivery within seconds, without waiting for the minute-long poll', async () => {
    for (const server of servers) if (server.child.exitCode === null) await server.stop('SIGKILL');
    const writer = await start({ WEBHOOK_DISPATCHER: 'false' });
    await start({ WEBHOOK_POLL_MS: '60000' }); // polls once at start, then only when notified
    await new Promise((r) => setTimeout(r, 300));
    const before = received.length;
    const sent = Date.now();
    const made = await fetch(`${writer.url}/api/v1/users`, {
      method: 'POST',
      headers: { authorization: ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify(aUserRequest()),
    });
    expect(made.status).toBe(201);
    while (received.length === before) {
      if (Date.now() - sent > 20_000) throw new Error('no delivery within 20 s: the notification did not wake it');
      await new Promise((r) => setTimeout(r, 20));
    }
    // Polling every 60 s: a delivery in seconds was woken by the notification.
    expect(Date.now() - sent).toBeLessThan(10_000);
  }, 60_000);
});
