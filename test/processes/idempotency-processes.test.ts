// docs/api-guide.md#safe-retries across processes (PostgreSQL): two instances of the service on one database share
// the keys, and a process killed with SIGKILL in the middle of keyed requests never leaves a
// write without its stored answer or an answer without its write: every retry afterwards gets
// exactly one order per key.
import { randomBytes, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aProductRequest, aUserRequest } from '../support/factories.js';
import { runServer, type ServerProcess } from '../support/process.js';
import { roundRobinProxy } from '../support/round-robin-proxy.js';
import { databaseEnv, engine, testPostgres } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';

// .ci/run's Node 24 pass sets TEST_DATABASE_URL to the empty string: no PostgreSQL.
// The test's own clients connect directly; the service through the pooler, when one is in front.
const baseUrl = testPostgres.directUrl;

interface Answer {
  status: number;
  body: string;
  replayed: boolean;
  retryAfter: string | null;
}

async function send(url: string, path: string, auth: string, key: string, payload: unknown): Promise<Answer> {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(payload),
  });
  return {
    status: r.status,
    body: await r.text(),
    replayed: r.headers.get('idempotent-replayed') === 'true',
    retryAfter: r.headers.get('retry-after'),
  };
}

/**
 * Sends as a retrying client does: again while the answer is "still in progress" (409 with
 * Retry-After: 1; soon, the test has no second to lose) or "overloaded, not started" (503 with
 * Retry-After, waited out as asked: sixty requests at once on a loaded CI core can meet the
 * service's concurrency limit, docs/operations.md#overload).
 */
async function sendUntilDone(url: string, path: string, auth: string, key: string, payload: unknown): Promise<Answer> {
  for (;;) {
    const answer = await send(url, path, auth, key, payload);
    if (answer.status === 409 && answer.retryAfter === '1') {
      await new Promise((resolve) => setTimeout(resolve, 10));
    } else if (answer.status === 503 && answer.retryAfter !== null && answer.body.includes('/problems/overloaded')) {
      await new Promise((resolve) => setTimeout(resolve, Number(answer.retryAfter) * 1000));
    } else {
      return answer;
    }
  }
}

describe.runIf(engine === 'postgres' && baseUrl !== undefined)('Idempotency-Key across processes', () => {
  const database = `ra_idem_${randomBytes(4).toString('hex')}`;
  const databaseUrl = baseUrl === undefined ? '' : new URL(database, baseUrl.replace(/\/[^/]*$/, '/')).toString();
  const admin = postgres(baseUrl ?? '', { max: 1, onnotice: () => {} });
  const servers: ServerProcess[] = [];
  let product: { id: number };
  let customer: { id: number; auth: string };

  const start = async () => {
    const server = await runServer({ ...databaseEnv(database), RATE_LIMIT_PER_MINUTE: '0' }).ready;
    servers.push(server);
    return server;
  };
  const stock = async () => {
    const db = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    try {
      const [row] = await db<{ available: number; reserved: number; orders: number }[]>`
        select s.available, s.reserved, (select count(*)::int from orders where customer_id = ${customer.id}) as orders
          from stock s where s.product_id = ${product.id}`;
      return row;
    } finally {
      await db.end();
    }
  };

  beforeAll(async () => {
    await admin.unsafe(`create database ${database}`);
    const first = await start();
    const made = await fetch(`${first.url}/api/products`, {
      method: 'POST',
      headers: { authorization: ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify(aProductRequest({ price: 1 })),
    });
    product = (await made.json()) as { id: number };
    await fetch(`${first.url}/api/stock/${product.id}`, {
      method: 'PUT',
      headers: { authorization: ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ available: 10_000 }),
    });
    const user = (await (
      await fetch(`${first.url}/api/v1/users`, {
        method: 'POST',
        headers: { authorization: ADMIN, 'content-type': 'application/json' },
        body: JSON.stringify(aUserRequest()),
      })
    ).json()) as { id: number };
    customer = { id: user.id, auth: await bearer({ sub: String(user.id), scope: 'orders:read orders:write' }) };
  }, 60_000);

  afterAll(async () => {
    for (const server of servers) if (server.child.exitCode === null) await server.stop('SIGKILL');
    await admin.unsafe(`drop database if exists ${database} with (force)`);
    await admin.end();
  });

  it('two instances on one database behind a proxy, the same key sent to both: one order', async () => {
    const [a, b] = [servers[0]!, await start()];
    const proxy = await roundRobinProxy([a.url, b.url]);
    const key = `"${randomUUID()}"`;
    const before = await stock();

    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        sendUntilDone(proxy.url, '/api/v1/orders', customer.auth, key, { productId: product.id, quantity: 2 }),
      ),
    ).finally(() => proxy.close());

    expect(proxy.sent.every((n) => n >= 10)).toBe(true); // both instances took their share

    expect(new Set(answers.map((x) => x.status))).toEqual(new Set([201]));
    expect(new Set(answers.map((x) => x.body)).size).toBe(1);
    expect(answers.filter((x) => !x.replayed)).toHaveLength(1);
    const after = await stock();
    expect(after!.orders).toBe(before!.orders + 1);
    expect(after!.reserved).toBe(before!.reserved + 2);
  }, 60_000);

  it('SIGKILL in the middle of keyed orders, then retries: exactly one order per key', async () => {
    const victim = servers[0]!;
    const survivor = servers[1]!;
    const keys = Array.from({ length: 60 }, () => `"${randomUUID()}"`);
    const payload = { productId: product.id, quantity: 1 };
    const before = await stock();

    // Fire them all at one process and kill it once a third are answered: some orders have
    // committed with their answers, some are mid-transaction, some never started.
    let done = 0;
    let third!: () => void;
    const aThirdDone = new Promise<void>((resolve) => (third = resolve));
    const inflight = keys.map((key) =>
      send(victim.url, '/api/v1/orders', customer.auth, key, payload)
        .catch(() => undefined)
        .finally(() => {
          if (++done === keys.length / 3) third();
        }),
    );
    await aThirdDone;
    victim.child.kill('SIGKILL');
    const beforeKill = await Promise.all(inflight);
    const answered = beforeKill.filter((a) => a !== undefined && a.status === 201).length;

    const retries = await Promise.all(
      keys.map((key) => sendUntilDone(survivor.url, '/api/v1/orders', customer.auth, key, payload)),
    );

    expect(retries.map((r) => r.status)).toEqual(keys.map(() => 201));
    const ids = retries.map((r) => (JSON.parse(r.body) as { id: number }).id);
    expect(new Set(ids).size).toBe(keys.length);
    // An answer the client saw before the kill is the one the retry replays.
    beforeKill.forEach((first, i) => {
      if (first?.status === 201) {
        expect(retries[i]!.replayed).toBe(true);
        expect(retries[i]!.body).toBe(first.body);
      }
    });
    const after = await stock();
    expect(after!.orders).toBe(before!.orders + keys.length);
    expect(after!.reserved).toBe(before!.reserved + keys.length);
    expect(answered).toBeLessThan(keys.length); // the kill did land mid-way
  }, 60_000);

  it('an answer the client never read: the retry gets it, not a second order', async () => {
    const server = servers[1]!;
    const key = `"${randomUUID()}"`;
    const payload = JSON.stringify({ productId: product.id, quantity: 1 });
    const before = await stock();

    // Send the whole request, and hang up without reading the answer once the service has it in
    // hand: its transaction holds the key's advisory lock, or it has already stored the answer.
    // (Hanging up sooner could lose the request in the socket before the service reads it.)
    const db = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    const received = async () => {
      const [row] = await db<{ seen: boolean }[]>`
        select exists (select 1 from pg_locks l join pg_database d on d.oid = l.database
                        where l.locktype = 'advisory' and l.granted and d.datname = current_database())
            or exists (select 1 from idempotency_keys where key in (${key}, ${key.slice(1, -1)})) as seen`;
      return row?.seen === true;
    };
    try {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(`${server.url}/api/v1/orders`, {
          method: 'POST',
          headers: { authorization: customer.auth, 'content-type': 'application/json', 'idempotency-key': key },
        });
        req.on('error', () => undefined);
        req.end(payload, () => {
          const poll = (): void => {
            received().then(
              (seen) => {
                if (!seen) return void setTimeout(poll, 1);
                req.destroy();
                resolve();
              },
              (error: unknown) => reject(error as Error),
            );
          };
          poll();
        });
      });
    } finally {
      await db.end();
    }
    const retry = await sendUntilDone(server.url, '/api/v1/orders', customer.auth, key, JSON.parse(payload));

    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe(true);
    const after = await stock();
    expect(after!.orders).toBe(before!.orders + 1);
    expect(after!.reserved).toBe(before!.reserved + 1);
  }, 30_000);
});
