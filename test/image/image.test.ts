// The image as a platform runs it (docs/deployment.md): the Dockerfile built with podman, run
// read-only and non-root against a fresh PostgreSQL database, and on the embedded engine with a
// volume. Where no registry is reachable, the official base images are local stand-ins of the same
// names (scripts/container/stand-ins.sh, kept between runs). Every podman command shares the
// host's network (never a bridge: it would change the host's firewall) and never pulls.
//
//   npm run test:image      (the `image` project: skipped with a warning where podman is missing,
//                            failing where CI=true)
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aProductRequest, aUserRequest } from '../support/factories.js';
import { TEST_ENCRYPTION_KEY, TEST_JWT_SECRET } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const CONTAINERS_CONF = join(ROOT, 'scripts/container/containers.conf');
const env = { ...process.env, CONTAINERS_CONF };
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const NODE_VERSION = /^ARG NODE_VERSION=(\S+)$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1] ?? '';
const BASE = `docker.io/library/node:${NODE_VERSION}-bookworm-slim`;
/** The image's own layers (everything above the node base) may weigh this much at most. */
const MAX_OWN_LAYERS = 120e6;
const SHUTDOWN_TIMEOUT_MS = 10_000;
const ADMIN_DATABASE_URL =
  process.env.IMAGE_TEST_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const hasPodman = await exec('podman', ['--version']).then(
  () => true,
  () => false,
);
if (!hasPodman && process.env.CI !== 'true')
  console.warn('test/image: podman is not installed: the image test is skipped (apt-get install podman buildah runc)');

const podman = async (...args: string[]) => (await exec('podman', args, { env, maxBuffer: 64 << 20 })).stdout.trim();
/** podman's exit code and output, for commands expected to fail. */
const podmanStatus = (...args: string[]) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile('podman', args, { env }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
    ),
  );

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Until GET /api/public/health/ready answers 200 (or `ms` pass): the milliseconds it took. */
async function readyWithin(port: number, startedAt: number, ms: number): Promise<number> {
  while (performance.now() - startedAt < ms) {
    const status = await fetch(`http://127.0.0.1:${port}/api/public/health/ready`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return performance.now() - startedAt;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not ready within ${ms} ms`);
}

describe.runIf(hasPodman || process.env.CI === 'true')('the image (podman)', () => {
  const run = `${process.pid}-${randomBytes(3).toString('hex')}`;
  const image = `localhost/resource-api:test-${run}`;
  const database = `resource_api_image_${run.replace('-', '_')}`;
  const volume = `resource-api-test-data-${run}`;
  const containers: string[] = [];
  const figures: string[] = [];
  let databaseUrl = '';

  const api = (port: number, path: string, init: RequestInit = {}) =>
    fetch(`http://127.0.0.1:${port}${path}`, {
      ...init,
      headers: {
        authorization: ADMIN,
        'content-type': 'application/json',
        ...(init.headers as Record<string, string> | undefined),
      },
    });

  /** `podman run -d` of the image, read-only, on the host's network; the time it was started. */
  async function start(name: string, envs: Record<string, string>, extra: string[] = []) {
    const container = `resource-api-test-${run}-${name}`;
    containers.push(container);
    const startedAt = performance.now();
    const flags = Object.entries(envs).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    await podman(
      'run',
      '-d',
      '--name',
      container,
      '--read-only',
      '--network=host',
      '--pull=never',
      ...flags,
      ...extra,
      image,
    );
    return { container, startedAt };
  }

  const keys = { JWT_SECRET: TEST_JWT_SECRET, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY };

  beforeAll(async () => {
    if (!hasPodman)
      throw new Error('podman is not installed, and CI runs the image test: apt-get install podman buildah runc');
    let at = performance.now();
    const made = await exec('bash', [join(ROOT, 'scripts/container/stand-ins.sh'), NODE_VERSION], { env });
    figures.push(
      `stand-ins: ${made.stdout.trim().replaceAll('\n', '; ')} (${((performance.now() - at) / 1000).toFixed(1)} s)`,
    );

    at = performance.now();
    // The machine's CA for the registry's TLS, as a build behind a TLS-inspecting proxy passes it.
    const ca = process.env.NODE_EXTRA_CA_CERTS;
    await podman(
      'build',
      '--pull=never',
      '--network=host',
      '--format=docker', // HEALTHCHECK is a Docker image field; OCI images drop it
      '--layers=false', // no step's image is kept: nothing of the build stage is left behind
      ...(ca === undefined || ca === '' ? [] : ['--secret', `id=ca,src=${ca}`]),
      '--build-arg',
      `SERVICE_VERSION=${PACKAGE.version}`,
      '-t',
      image,
      ROOT,
    );
    figures.push(`build: ${((performance.now() - at) / 1000).toFixed(1)} s`);

    const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${database}`);
    await admin.end();
    const url = new URL(ADMIN_DATABASE_URL);
    url.pathname = `/${database}`;
    url.search = '';
    databaseUrl = url.toString();
  }, 420_000);

  afterAll(async () => {
    console.log(`test/image: ${figures.join('; ')}`);
    for (const container of containers) await podmanStatus('rm', '-f', '-t', '0', container);
    await podmanStatus('volume', 'rm', '-f', volume);
    await podmanStatus('rmi', '-f', image);
    if (databaseUrl !== '') {
      const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {} });
      await admin.unsafe(`drop database if exists ${database} with (force)`);
      await admin.end();
    }
  }, 60_000);

  it('is the Dockerfile as said: node user, production, node as the command, labels, a health check, port 8080', async () => {
    const [config] = JSON.parse(await podman('image', 'inspect', image)) as {
      Healthcheck?: { Test: string[] };
      Config: {
        User: string;
        Env: string[];
        Cmd: string[];
        Entrypoint: string[] | null;
        Labels: Record<string, string>;
        ExposedPorts: Record<string, unknown>;
      };
    }[];

    expect(config?.Config.User).toBe('node');
    expect(config?.Config.Env).toContain('NODE_ENV=production');
    expect(config?.Config.Cmd).toEqual(['node', '--enable-source-maps', 'dist/src/server.js']);
    expect(config?.Config.Labels).toMatchObject({
      'org.opencontainers.image.source': expect.stringMatching(/^https:\/\//),
      'org.opencontainers.image.version': PACKAGE.version,
      'org.opencontainers.image.licenses': 'MIT',
    });
    expect(Object.keys(config?.Config.ExposedPorts ?? {})).toEqual(['8080/tcp']);
    expect(config?.Healthcheck?.Test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    // The default build arguments match package.json too: `docker build .` alone labels it right.
    expect(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).toContain(`ARG SERVICE_VERSION=${PACKAGE.version}\n`);
  });

  it(`adds at most ${MAX_OWN_LAYERS / 1e6} MB above the node base`, async () => {
    const size = async (name: string) => Number(await podman('image', 'inspect', '--format', '{{.Size}}', name));

    const own = (await size(image)) - (await size(BASE));

    figures.push(`own layers: ${(own / 1e6).toFixed(1)} MB above ${BASE}`);
    expect(own).toBeLessThan(MAX_OWN_LAYERS);
  });

  it('holds dist/ and the production dependencies, and none of the excluded list', async () => {
    const listing = await podman(
      'run',
      '--rm',
      '--network=host',
      '--pull=never',
      '--no-healthcheck',
      '--entrypoint',
      'sh',
      image,
      '-c',
      'cd /app && ls -A && echo --- && find . -path ./node_modules -prune -o -type f -print && echo --- && ls node_modules && echo --- && ls -A /run/secrets 2>/dev/null; ls -A / ',
    );
    const [top = '', files = '', modules = '', root = ''] = listing.split('\n---\n');
    const paths = files.split('\n');

    expect(top.split('\n').sort()).toEqual(['config', 'dist', 'node_modules', 'package.json', 'scripts']);
    expect(paths).toContain('./dist/src/server.js');
    expect(paths).toContain('./dist/scripts/migrate.js');
    expect(paths.filter((p) => /\.ts$|\.test\.js$|^\.\/(src|test|bench|docs|data|\.git)\/|\.env$/.test(p))).toEqual([]);
    for (const dev of ['typescript', 'tsx', 'vitest', 'esbuild', 'eslint', 'prettier', 'playwright-core', '@types'])
      expect(modules.split('\n')).not.toContain(dev);
    expect(modules.split('\n')).toContain('fastify');
    // The build's CA secret is mounted for one step only: nothing of it is left in a layer.
    expect(root.split('\n')).not.toContain('run/secrets');
  });

  it('refuses to start without its production keys, saying which in one line of its log', async () => {
    const { container } = await start('no-keys', { DATABASE_URL: databaseUrl }, ['--no-healthcheck']);

    const code = Number(await podman('wait', container));
    const logs = await podmanStatus('logs', container);

    expect(code).toBe(1);
    expect(`${logs.stdout}${logs.stderr}`).toBe(
      'Invalid configuration: JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL) and ENCRYPTION_KEY are required when NODE_ENV=production (the key that checks tokens; ENCRYPTION_KEY: base64 of 32 random bytes, openssl rand -base64 32)\n',
    );
  });

  describe('on PostgreSQL, read-only', () => {
    let port = 0;
    let container = '';

    beforeAll(async () => {
      port = await freePort();
      const started = await start('postgres', {
        ...keys,
        PORT: String(port),
        DATABASE_URL: databaseUrl,
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      });
      container = started.container;
      const ms = await readyWithin(port, started.startedAt, 10_000).catch(async (error: unknown) => {
        throw new Error(`${String(error)}: ${await podman('logs', container)}`);
      });
      figures.push(`ready on PostgreSQL (empty database, migrations): ${(ms / 1000).toFixed(2)} s after podman run`);
    }, 30_000);

    it('answers: a user created and read back with its ETag, an order placed, a 304', async () => {
      const created = await api(port, '/api/v1/users', { method: 'POST', body: JSON.stringify(aUserRequest()) });
      const user = (await created.json()) as { id: number };
      const read = await api(port, `/api/v1/users/${user.id}`);
      const etag = read.headers.get('etag') ?? '';
      const again = await api(port, `/api/v1/users/${user.id}`, { headers: { 'if-none-match': etag } });
      const product = (await (
        await api(port, '/api/products', { method: 'POST', body: JSON.stringify(aProductRequest()) })
      ).json()) as { id: number };
      const stocked = await api(port, `/api/stock/${product.id}`, {
        method: 'PUT',
        body: JSON.stringify({ available: 5 }),
      });
      const order = await api(port, '/api/v1/orders', {
        method: 'POST',
        headers: { authorization: await bearer({ sub: String(user.id), scope: 'orders:read orders:write' }) },
        body: JSON.stringify({ productId: product.id, quantity: 2 }),
      });
      const page = await fetch(`http://127.0.0.1:${port}/api/public/password-reset`);

      expect(created.status).toBe(201);
      expect(read.status).toBe(200);
      expect(await read.json()).toEqual(user);
      expect(etag).toMatch(/^(W\/)?"\d+"$/);
      expect(again.status).toBe(304);
      expect(stocked.status).toBe(200);
      expect(order.status).toBe(201);
      expect(await order.json()).toMatchObject({ customerId: user.id, status: 'PENDING' });
      expect(page.status).toBe(200); // the reset page's files are beside the build
    });

    it('runs as uid 1000, and its health check (node, no curl) says healthy', async () => {
      const pid = await podman('inspect', '--format', '{{.State.Pid}}', container);
      const uid = /^Uid:\s+(\d+)\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));

      const health = await podmanStatus('healthcheck', 'run', container);

      expect(uid?.slice(1)).toEqual(['1000', '1000']);
      expect(health.code).toBe(0);
    });

    it('runs the operator commands from the build: npm run migrate, npm run token', async () => {
      const migrate = await podman('exec', container, 'npm', 'run', '-s', 'migrate');
      const token = await podman(
        'exec',
        container,
        'npm',
        'run',
        '-s',
        'token',
        '--',
        '--sub',
        '1',
        '--scope',
        'users:read',
      );

      expect(migrate).toBe('postgres: up to date');
      expect(
        (await fetch(`http://127.0.0.1:${port}/api/v1/users/1`, { headers: { authorization: `Bearer ${token}` } }))
          .status,
      ).not.toBe(401);
    });

    it('stops on podman stop (SIGTERM) with exit 0 within its shutdown time, an in-flight request answered', async () => {
      const body = JSON.stringify(aUserRequest());
      const answered = new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          `http://127.0.0.1:${port}/api/v1/users`,
          {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
              authorization: ADMIN,
            },
          },
          (res) => res.resume().on('end', () => resolve(res.statusCode ?? 0)),
        );
        req.on('error', reject);
        req.write(body.slice(0, 10)); // in flight: the rest is sent after the signal
        setTimeout(() => req.end(body.slice(10)), 500);
      });
      await new Promise((r) => setTimeout(r, 100));

      const at = performance.now();
      const stopped = new Promise<void>((resolve, reject) =>
        spawn('podman', ['stop', '-t', String(SHUTDOWN_TIMEOUT_MS / 1000 + 5), container], { env, stdio: 'ignore' })
          .on('exit', () => resolve())
          .on('error', reject),
      );
      const status = await answered;
      await stopped;
      const ms = performance.now() - at;
      const exitCode = await podman('inspect', '--format', '{{.State.ExitCode}}', container);
      const logs = await podman('logs', container);

      figures.push(`stopped in ${(ms / 1000).toFixed(2)} s`);
      expect(status).toBe(201);
      expect(exitCode).toBe('0');
      expect(ms).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
      expect(logs).toContain('"signal":"SIGTERM","msg":"shutting down"');
    });
  });

  it('keeps the embedded engine’s data in a volume at DATA_DIR across a restart (the demo), saying it is a demo', async () => {
    await podman('volume', 'create', volume);
    const port = await freePort();
    const demo = { ...keys, PORT: String(port) };
    const first = await start('embedded-1', demo, ['-v', `${volume}:/data`, '--no-healthcheck']);
    // A first start makes the database (initdb and every migration, in the process): seconds.
    const ms = await readyWithin(port, first.startedAt, 60_000);
    figures.push(`ready on the embedded engine (new volume): ${(ms / 1000).toFixed(2)} s`);
    const user = (await (
      await api(port, '/api/v1/users', { method: 'POST', body: JSON.stringify(aUserRequest()) })
    ).json()) as { id: number };
    await podman('stop', '-t', '15', first.container);
    const firstLogs = await podman('logs', first.container);

    const second = await start('embedded-2', demo, ['-v', `${volume}:/data`, '--no-healthcheck']);
    await readyWithin(port, second.startedAt, 60_000);
    const read = await api(port, `/api/v1/users/${user.id}`);

    expect(read.status).toBe(200);
    expect(await read.json()).toEqual(user);
    expect(firstLogs).toContain(
      'NODE_ENV=production without DATABASE_URL: running on the embedded engine (PGlite in this process, persisted under DATA_DIR /data): fine for a demo',
    );
    await podman('stop', '-t', '15', second.container);
    expect(await podman('inspect', '--format', '{{.State.ExitCode}}', second.container)).toBe('0');
  }, 180_000);
});
