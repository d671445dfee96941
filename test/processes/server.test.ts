// The process as an operator sees it: start-up errors, persistence of the embedded database
// across a restart, and a graceful stop that finishes in-flight work (docs/configuration.md).
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { request as httpRequest, Agent } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { aUserRequest } from '../support/factories.js';
import { runServer } from '../support/process.js';
import { engine } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';
import { until } from '../support/until.js';

// Process tests do not depend on the engine under test; they run once, in the embedded run.
const run = engine === 'pglite';

/** The most backlog the kernel gives a listening socket (Linux; 0 elsewhere). */
const SOMAXCONN = Number(await readFile('/proc/sys/net/core/somaxconn', 'utf8').catch(() => '0'));

describe.runIf(run)('the server process', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'resource-api-'));
    dirs.push(dir);
    return dir;
  };

  it('stops at start-up with one line naming a bad variable, exit code 1', async () => {
    const { exited } = runServer({ PORT: 'eighty' });

    const { code, stderr } = await exited;

    expect(code).toBe(1);
    expect(stderr).toBe('Invalid configuration: PORT must be an integer from 0 to 65535 (got "eighty")\n');
  });

  it('stops at start-up with one line naming OTEL_TRACES_SAMPLER when it is misspelt, exit code 1', async () => {
    const { exited } = runServer({
      DATABASE_URL: 'memory://',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidration',
    });

    const { code, stderr } = await exited;

    expect(code).toBe(1);
    expect(stderr).toBe(
      'Invalid configuration: OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (got "parentbased_traceidration")\n',
    );
  });

  it('refuses to start in production without a key', async () => {
    const { exited } = runServer({ NODE_ENV: 'production', DATABASE_URL: 'memory://', JWT_SECRET: '' });

    const { code, stderr } = await exited;

    expect(code).toBe(1);
    expect(stderr).toBe(
      'Invalid configuration: JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL) is required when NODE_ENV=production\n',
    );
  });

  it('refuses to start in production without ENCRYPTION_KEY, or with one that is not 32 bytes, naming it', async () => {
    const missing = await runServer({ NODE_ENV: 'production', DATABASE_URL: 'memory://', ENCRYPTION_KEY: '' }).exited;
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      'Invalid configuration: ENCRYPTION_KEY is required when NODE_ENV=production: base64 of 32 random bytes (openssl rand -base64 32); it encrypts webhook secrets and stored answers in the database\n',
    );
    const short = await runServer({ ENCRYPTION_KEY: 'c2hvcnQ=' }).exited;
    expect(short.code).toBe(1);
    expect(short.stderr).toBe(
      'Invalid configuration: ENCRYPTION_KEY must be base64 of 32 random bytes (make one with: openssl rand -base64 32) (got (hidden))\n',
    );
  });

  it('generates ENCRYPTION_KEY into DATA_DIR outside production, and reads what it stored after a restart', async () => {
    const dataDir = await tempDir();
    const env = { DATA_DIR: dataDir, ENCRYPTION_KEY: '', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
    const first = await runServer(env).ready;
    const keyFile = join(dataDir, 'encryption-key');
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect(Buffer.from((await readFile(keyFile, 'utf8')).trim(), 'base64')).toHaveLength(32);
    const create = (server: { url: string }) =>
      fetch(`${server.url}/api/v1/webhook-subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: ADMIN, 'idempotency-key': 'generated-key' },
        body: JSON.stringify({ url: 'http://127.0.0.1:9/hook', events: ['user.deleted'] }),
      });
    const made = await create(first);
    expect(made.status).toBe(201);
    const body = await made.text();
    expect((await first.stop()).code).toBe(0);

    const second = await runServer(env).ready;
    const replayed = await create(second);
    expect(replayed.status).toBe(201);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(await replayed.text()).toBe(body);
    expect((await second.stop()).code).toBe(0);
    // Two starts of a process on the embedded engine: ~17 s on an idle host, twice that under CI's load.
  }, 60_000);

  it('says what it does before opening and migrating a new database, in a line written at once', async () => {
    const dataDir = await tempDir();
    const started = runServer({ DATA_DIR: dataDir });
    const said = await until(
      'the line before the database work',
      () => started.logs.find((l) => l.msg === 'opening the database and applying pending migrations'),
      30_000,
    );
    const ready = started.logs.some((l) => l.msg === 'resource-api ready'); // the line came first
    const server = await started.ready;

    expect(said).toMatchObject({ engine: 'pglite', dataDir });
    expect(ready).toBe(false);
    expect((await server.stop()).code).toBe(0);
  }, 60_000);

  it('says at warn when production runs on the embedded engine', async () => {
    const dataDir = await tempDir();
    const server = await runServer({ NODE_ENV: 'production', DATA_DIR: dataDir }).ready;
    await server.stop();

    expect(server.logs.filter((l) => l.level === 40 && String(l.msg).includes('embedded engine'))).toEqual([
      expect.objectContaining({
        engine: 'pglite',
        msg: `NODE_ENV=production without DATABASE_URL: running on the embedded engine (PGlite in this process, persisted under DATA_DIR ${dataDir}): fine for a demo, not for production load; set DATABASE_URL to a PostgreSQL server`,
      }),
    ]);
  });

  it('refuses to start in production without any of its keys, naming them all in one line', async () => {
    const { code, stderr } = await runServer({ NODE_ENV: 'production', JWT_SECRET: '', ENCRYPTION_KEY: '' }).exited;

    expect(code).toBe(1);
    expect(stderr).toBe(
      'Invalid configuration: JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL) and ENCRYPTION_KEY are required when NODE_ENV=production (the key that checks tokens; ENCRYPTION_KEY: base64 of 32 random bytes, openssl rand -base64 32)\n',
    );
  });

  it('keeps the embedded database under DATA_DIR across a restart', async () => {
    const dataDir = await tempDir();
    const first = await runServer({ DATA_DIR: dataDir }).ready;
    const created = await fetch(`${first.url}/api/v1/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: ADMIN },
      body: JSON.stringify(aUserRequest()),
    });
    const user = (await created.json()) as { id: number };
    expect((await first.stop()).code).toBe(0);

    const second = await runServer({ DATA_DIR: dataDir }).ready;
    const fetched = await fetch(`${second.url}/api/v1/users/${user.id}`, { headers: { authorization: ADMIN } });

    expect(fetched.status).toBe(200);
    expect(await fetched.json()).toEqual(user);
    expect(second.logs.find((l) => l.msg === 'migrations applied')).toBeUndefined();
    expect((await second.stop()).code).toBe(0);
  });

  it('refuses a second process on the same DATA_DIR, and takes over a lock whose process is gone', async () => {
    const dataDir = await tempDir();
    const first = await runServer({ DATA_DIR: dataDir }).ready;

    const second = await runServer({ DATA_DIR: dataDir }).exited;
    await first.stop();
    await writeFile(join(dataDir, 'pglite', 'resource-api.lock'), '2147483646');
    const third = await runServer({ DATA_DIR: dataDir }).ready;
    const { code } = await third.stop();

    expect(second.code).toBe(1);
    expect(second.stderr).toBe(
      `The embedded database in ${join(dataDir, 'pglite')} is in use by process ${first.child.pid}; stop it first, or set DATA_DIR or DATABASE_URL\n`,
    );
    expect(code).toBe(0);
  });

  it('finishes an in-flight request on SIGTERM, closes idle keep-alive sockets and exits 0 at once', async () => {
    const server = await runServer({ DATABASE_URL: 'memory://' }).ready;
    const agent = new Agent({ keepAlive: true });
    // An idle keep-alive connection, which must not hold the shutdown for its 72 s timeout.
    const warm = await fetch(`${server.url}/api/public/health/live`);
    expect(warm.status).toBe(200);
    await new Promise<void>((resolve, reject) =>
      httpRequest(`${server.url}/api/public/health/live`, { agent }, (res) => res.resume().on('end', resolve))
        .on('error', reject)
        .end(),
    );
    // An in-flight request: headers and half the body sent before the signal, the rest after.
    const body = JSON.stringify(aUserRequest());
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${server.url}/api/v1/users`,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            authorization: ADMIN,
          },
        },
        (res) => {
          let text = '';
          res
            .on('data', (d: Buffer) => (text += d.toString()))
            .on('end', () => resolve({ status: res.statusCode!, body: text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      setTimeout(() => req.end(body.slice(10)), 300);
    });
    await new Promise((r) => setTimeout(r, 100));

    const exit = server.stop('SIGTERM');
    const answered = await response;
    const { code, ms } = await exit;

    expect(answered.status).toBe(201);
    expect(JSON.parse(answered.body)).toMatchObject({ id: expect.any(Number) });
    expect(code).toBe(0);
    expect(ms).toBeLessThan(3000); // the client agent would hold an idle socket for 5 s, the server for 72 s
    expect(server.logs.some((l) => l.msg === 'shutting down' && l.signal === 'SIGTERM')).toBe(true);
    agent.destroy();
  });

  // (The kernel caps the backlog at somaxconn: under 1,024 the burst cannot be queued, and the
  // test is reported skipped, not passed.)
  it.skipIf(SOMAXCONN < 1024)(
    'has the kernel queue a burst of 1,000 new connections while it cannot take them, none dropped',
    async () => {
      // Past the listen backlog, Linux drops a new connection's handshake and its client tries again
      // a second later (Node's default of 511 would leave half of these waiting that second). The
      // process is stopped, so nothing is accepted while they connect; each must connect at once,
      // and be answered once the process runs again.
      const server = await runServer({ DATABASE_URL: 'memory://' }).ready;
      const { port } = new URL(server.url);
      server.child.kill('SIGSTOP');
      const sockets: Socket[] = [];
      try {
        const started = performance.now();
        const connected = await Promise.all(
          Array.from(
            { length: 1000 },
            () =>
              new Promise<number>((resolve, reject) => {
                const socket = connect({ port: Number(port), host: '127.0.0.1' });
                sockets.push(socket);
                socket.once('error', reject).once('connect', () => resolve(performance.now() - started));
                // (Not connected in 1.5 s: its handshake was dropped, and is tried again.)
                setTimeout(() => resolve(Number.POSITIVE_INFINITY), 1500).unref();
              }),
          ),
        );
        // (A dropped handshake is tried again after a second.)
        expect(Math.max(...connected)).toBeLessThan(950);
        const answered = sockets.map(
          (socket) =>
            new Promise<string>((resolve, reject) => {
              let text = '';
              socket.on('data', (d: Buffer) => (text += d.toString())).once('error', reject);
              // (Whatever came, once the connection closes or 10 s have passed: a bounded wait.)
              socket.once('close', () => resolve(text));
              setTimeout(() => resolve(text), 10_000).unref();
              socket.write('GET /api/public/health/live HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
            }),
        );
        server.child.kill('SIGCONT');
        const statuses = (await Promise.all(answered)).map((text) => text.slice(0, 12));
        expect(statuses.filter((s) => s === 'HTTP/1.1 200')).toHaveLength(1000);
      } finally {
        server.child.kill('SIGCONT');
        for (const socket of sockets) socket.destroy();
        await server.stop();
      }
    },
  );

  it('stops on SIGINT too', async () => {
    const server = await runServer({ DATABASE_URL: 'memory://' }).ready;

    const { code } = await server.stop('SIGINT');

    expect(code).toBe(0);
  });

  it('serves /metrics on METRICS_PORT when it is set, and closes it on SIGTERM', async () => {
    const server = await runServer({ DATABASE_URL: 'memory://', METRICS_PORT: '0' }).ready;
    const entry = server.logs.find((l) => l.msg === 'metrics listening');

    const response = await fetch(String(entry?.url));
    const { code } = await server.stop();

    expect(response.status).toBe(200);
    expect(await response.text()).toContain('# TYPE http_requests_total counter');
    expect(code).toBe(0);
  });

  it('writes one JSON log line per request, with its request id', async () => {
    const server = await runServer({ DATABASE_URL: 'memory://' }).ready;

    await fetch(`${server.url}/api/public/problems/conflict`, { headers: { 'x-request-id': 'trace-me-42' } });
    await fetch(`${server.url}/api/public/health/live`, { headers: { 'x-request-id': 'probe-43' } });
    await fetch(`${server.url}/api/public/health/ready`, { headers: { 'x-request-id': 'probe-44' } });
    await server.stop();

    const lines = server.logs.filter((l) => l.requestId === 'trace-me-42');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: 'request completed',
      method: 'GET',
      url: '/api/public/problems/conflict',
      statusCode: 200,
      responseTime: expect.any(Number),
    });
    // Health probes are logged at debug only: nothing at info.
    expect(server.logs.filter((l) => l.requestId === 'probe-43' || l.requestId === 'probe-44')).toEqual([]);
    // The hot statements ran on the database before the port opened (test/database/warm-up.test.ts).
    expect(server.logs.find((l) => l.msg === 'resource-api ready')).toMatchObject({ warmUpMs: expect.any(Number) });
  });

  it('writes a buffered line out within the flush period, while the server keeps running', async () => {
    const server = await runServer({ DATABASE_URL: 'memory://' }).ready;

    await fetch(`${server.url}/api/public/problems/conflict`, { headers: { 'x-request-id': 'flushed-45' } });
    const deadline = Date.now() + 2000;
    while (!server.logs.some((l) => l.requestId === 'flushed-45') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const seen = server.logs.some((l) => l.requestId === 'flushed-45');
    await server.stop();

    expect(seen).toBe(true);
  });
});
