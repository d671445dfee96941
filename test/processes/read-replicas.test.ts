// Read replicas with read-your-writes (docs/operations.md "Running at scale"): a primary and a
// streaming replica that applies WAL 1.5 s late (recovery_min_apply_delay), each a throwaway
// cluster on a loopback port, and instances of the service as real processes. Reads reach the
// replica (its pg_stat_database counts them); a caller always sees its own create and change
// on its next read, through another instance too (positions in Redis) and inside one instance
// without Redis; a replica further behind than REPLICA_MAX_LAG_MS is skipped; killing the replica
// costs no request.
import { createConnection } from 'node:net';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createReplicatedPostgres,
  privatePostgresUnavailable,
  type ReplicatedPostgres,
} from '../support/private-postgres.js';
import { runServer, type ServerProcess } from '../support/process.js';
import { required } from '../support/required.js';
import { engine, testPostgres } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const redisUp = await new Promise<boolean>((resolve) => {
  const socket = createConnection(6379, '127.0.0.1');
  socket.once('connect', () => {
    socket.destroy();
    resolve(true);
  });
  socket.once('error', () => resolve(false));
});

async function call(url: string, method: string, path: string, auth: string, body?: unknown) {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: await response.text() };
}

// Once per CI run: on the PostgreSQL pass without a pooler (the clusters are the test's own).
const run =
  engine === 'postgres' &&
  testPostgres.pooler === 'none' &&
  required('test/processes/read-replicas.test.ts', privatePostgresUnavailable) &&
  required('test/processes/read-replicas.test.ts', redisUp ? undefined : `nothing listens on ${REDIS_URL}`);
describe.runIf(run)('read replicas', () => {
  let pair: ReplicatedPostgres | undefined;
  const servers: ServerProcess[] = [];
  let a: string;
  let b: string;
  let alone: string;
  // A caller with every users scope (admin: it may create users), whose writes are tracked.
  const writer = bearer({ sub: '700001', scope: 'admin users:read users:write' });

  const start = async (env: Record<string, string>) => {
    if (pair === undefined) throw new Error('no clusters');
    const server = await runServer({
      DATABASE_URL: pair.primary.url,
      DATABASE_REPLICA_URLS: pair.standby.url,
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
      WEBHOOK_DISPATCHER: 'false',
      ...env,
    }).ready;
    servers.push(server);
    return server.url;
  };

  /**
   * Transactions the replica has committed so far (each read there is one). A backend reports
   * its counts when it has been idle for 10 s, or every second while busy, so the figures are
   * read after 12 s, and compared with a window of the same length without reads: the
   * instances' health checks commit there too.
   */
  const replicaCommits = async () => {
    if (pair === undefined) throw new Error('no clusters');
    const sql = postgres(pair.standby.url, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql<{ n: number }[]>`
        select xact_commit::int as n from pg_stat_database where datname = 'postgres'`;
      return row?.n ?? 0;
    } finally {
      await sql.end();
    }
  };
  /** The replica's commits during `work` and the 12 s after it, less those of as long a window without it. */
  const replicaCommitsOf = async (work: () => Promise<void>) => {
    const start = await replicaCommits();
    const started = Date.now();
    await work();
    const took = Date.now() - started;
    await new Promise((r) => setTimeout(r, 12_000));
    const middle = await replicaCommits();
    await new Promise((r) => setTimeout(r, took + 12_000));
    const end = await replicaCommits();
    return middle - start - (end - middle);
  };

  beforeAll(async () => {
    pair = await createReplicatedPostgres(['recovery_min_apply_delay=1500ms']);
    // The first instance migrates the primary; the others start once the replica has the tables.
    a = await start({ REDIS_URL });
    await new Promise((r) => setTimeout(r, 2500));
    b = await start({ REDIS_URL });
    alone = await start({});
    // Each instance has found the replica up.
    await new Promise((r) => setTimeout(r, 1000));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    pair?.destroy();
  });

  it('sends reads to the replica', { timeout: 90_000 }, async () => {
    const created = await call(a, 'POST', '/api/v1/users', await writer, {
      name: 'Old Reader',
      email: 'old.reader@example.com',
      password: 'correct horse battery',
    });
    expect(created.status).toBe(201);
    const { id } = JSON.parse(created.body) as { id: number };
    await new Promise((r) => setTimeout(r, 2500)); // the replica has it now
    const reader = await bearer({ sub: String(id), scope: 'users:read' });
    await new Promise((r) => setTimeout(r, 12_000)); // counts of earlier statements reported
    const reads = await replicaCommitsOf(async () => {
      for (let i = 0; i < 100; i++)
        expect((await call(i % 2 ? a : b, 'GET', `/api/v1/users/${id}`, reader)).status).toBe(200);
    });
    expect(reads).toBeGreaterThanOrEqual(90);
  });

  it('shows a caller its own create and change at once, through another instance (Redis)', async () => {
    const control: number[] = [];
    const someoneElse = await bearer({ sub: '700002', scope: 'admin users:read' });
    for (let i = 0; i < 10; i++) {
      const created = await call(a, 'POST', '/api/v1/users', await writer, {
        name: `Writer ${i}`,
        email: `writer.${i}@example.com`,
        password: 'correct horse battery',
      });
      expect(created.status).toBe(201);
      const { id } = JSON.parse(created.body) as { id: number };
      // Another caller, who wrote nothing, reads from the replica: 1.5 s behind, it lacks the user.
      control.push((await call(b, 'GET', `/api/v1/users/${id}`, someoneElse)).status);
      expect((await call(b, 'GET', `/api/v1/users/${id}`, await writer)).status).toBe(200);

      const changed = await call(b, 'PATCH', `/api/v1/users/${id}`, await writer, { name: `Changed ${i}` });
      expect(changed.status).toBe(200);
      const read = await call(a, 'GET', `/api/v1/users/${id}`, await writer);
      expect(JSON.parse(read.body)).toMatchObject({ name: `Changed ${i}` });
    }
    // The instrument can fail: the replica really is behind for whoever did not write.
    expect(control).toContain(404);
  });

  it('shows a caller its own writes inside one instance without Redis', async () => {
    const caller = await bearer({ sub: '700003', scope: 'admin users:read users:write' });
    for (let i = 0; i < 5; i++) {
      const created = await call(alone, 'POST', '/api/v1/users', caller, {
        name: `Alone ${i}`,
        email: `alone.${i}@example.com`,
        password: 'correct horse battery',
      });
      expect(created.status).toBe(201);
      const { id } = JSON.parse(created.body) as { id: number };
      expect((await call(alone, 'GET', `/api/v1/users/${id}`, caller)).status).toBe(200);
    }
  });

  it('skips a replica further behind than REPLICA_MAX_LAG_MS', { timeout: 90_000 }, async () => {
    const strict = await start({ REPLICA_MAX_LAG_MS: '200' });
    const reader = await bearer({ sub: '700004', scope: 'admin users:read' });
    // Keep the primary busy so that the replica stays 1.5 s behind it.
    const busy = { writing: true };
    const writes = (async () => {
      for (let i = 0; busy.writing; i++)
        await call(a, 'POST', '/api/v1/users', await writer, {
          name: `Busy ${i}`,
          email: `busy.${i}.${Date.now()}@example.com`,
          password: 'correct horse battery',
        });
    })();
    await new Promise((r) => setTimeout(r, 1500));
    const reads = await replicaCommitsOf(async () => {
      for (let i = 0; i < 50; i++)
        expect((await call(strict, 'GET', `/api/v1/users/${1 + (i % 3)}`, reader)).status).toBe(200);
      busy.writing = false;
      await writes;
    });
    expect(reads).toBeLessThan(20); // not the 50 reads
  });

  it('costs no request when the replica dies', async () => {
    if (pair === undefined) throw new Error('no clusters');
    const reader = await bearer({ sub: '700005', scope: 'admin users:read' });
    const statuses: number[] = [];
    const state = { reading: true };
    const reads = (async () => {
      while (state.reading) statuses.push((await call(b, 'GET', '/api/v1/users?size=5', reader)).status);
    })();
    await new Promise((r) => setTimeout(r, 500));
    pair.standby.crash();
    await new Promise((r) => setTimeout(r, 2000));
    state.reading = false;
    await reads;
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });
});
