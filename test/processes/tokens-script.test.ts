// The development secret is generated once into DATA_DIR, start-up says how to get a token
// (the command for its DATA_DIR, word for word), and `npm run token` prints one the service accepts:
// without options the development token (user 1, every scope), with them the token asked for.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { runServer } from '../support/process.js';
import { engine } from '../support/test-app.js';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');

describe.runIf(engine === 'pglite')('development secret and npm run token', async () => {
  if (engine !== 'pglite') return; // a skipped suite's body still runs at collection
  const dataDir = await mkdtemp(join(tmpdir(), 'resource-api-token-'));
  afterAll(() => rm(dataDir, { recursive: true, force: true }));
  const env = {
    PATH: process.env.PATH ?? '',
    NODE_ENV: 'development',
    LOG_FORMAT: 'json',
    DATA_DIR: dataDir,
    JWT_SECRET: '',
  };

  it('generates a secret once, logs how to get a token, and accepts the token the script prints', async () => {
    const server = await runServer({ ...env, DATABASE_URL: 'memory://' }).ready;
    const secretFile = join(dataDir, 'jwt-secret');
    const secret = await readFile(secretFile, 'utf8');
    const { stdout } = await exec(
      process.execPath,
      ['--import', 'tsx', 'scripts/token.ts', '--sub', '5', '--scope', 'users:read'],
      { cwd: ROOT, env },
    );

    const response = await fetch(`${server.url}/api/v1/users/5`, {
      headers: { authorization: `Bearer ${stdout.trim()}` },
    });
    await server.stop();
    const again = await runServer({ ...env, DATABASE_URL: 'memory://' }).ready;
    await again.stop();

    expect(secret.trim()).toMatch(/^[A-Za-z0-9_-]{64}$/);
    expect((await stat(secretFile)).mode & 0o777).toBe(0o600);
    // The hint names this DATA_DIR: `npm run token` in another shell would not know it.
    expect(
      server.logs.some(
        (l) => l.level === 40 && String(l.msg).endsWith(`with: TOKEN=$(DATA_DIR=${dataDir} npm run -s token)`),
      ),
    ).toBe(true);
    expect(response.status).toBe(404);
    expect(await readFile(secretFile, 'utf8')).toBe(secret);
  });

  it('the command the hint prints, run as printed from another shell, gives a token the server accepts', async () => {
    const server = await runServer({ ...env, DATABASE_URL: 'memory://' }).ready;
    try {
      const hint = server.logs.find((l) => l.level === 40 && String(l.msg).includes('TOKEN=$('));
      const command = /with: (TOKEN=\$\(.*\))$/.exec(String(hint?.msg))?.[1];
      expect(command).toBeDefined();
      // A shell without the server's DATA_DIR, in the project's directory as npm runs scripts.
      const { stdout } = await exec('bash', ['-c', `${command!}; printf %s "$TOKEN"`], {
        cwd: ROOT,
        env: { PATH: env.PATH, NODE_ENV: 'development', JWT_SECRET: '' },
      });
      const response = await fetch(`${server.url}/api/v1/users/1`, { headers: { authorization: `Bearer ${stdout}` } });
      expect(response.status).toBe(404); // authorized: there is no user 1
    } finally {
      await server.stop();
    }
  });

  it('refuses with one line, and makes no secret, in a DATA_DIR no server has used', async () => {
    const unused = join(dataDir, 'never-started');
    const failed = exec(process.execPath, ['--import', 'tsx', 'scripts/token.ts'], {
      cwd: ROOT,
      env: { ...env, DATA_DIR: unused },
    });

    await expect(failed).rejects.toMatchObject({
      code: 1,
      stderr: `No development secret in ${unused}: no server has used this DATA_DIR yet (start it with the same DATA_DIR first)\n`,
    });
    await expect(stat(unused)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('prints the development token without options: user 1, every scope, for 24 hours', async () => {
    const { stdout } = await exec(process.execPath, ['--import', 'tsx', 'scripts/token.ts'], { cwd: ROOT, env });
    const claims = JSON.parse(Buffer.from(stdout.trim().split('.')[1]!, 'base64url').toString()) as {
      sub: string;
      scope: string;
      iat: number;
      exp: number;
    };

    expect(claims.sub).toBe('1');
    expect(claims.scope.split(' ').sort()).toEqual(
      [
        'admin',
        'orders:read',
        'orders:write',
        'products:read',
        'products:write',
        'users:read',
        'users:write',
        'webhooks:read',
        'webhooks:write',
      ].sort(),
    );
    expect(claims.exp - claims.iat).toBe(24 * 3600);
  });

  it('refuses a --sub that is not a user id, and a scope it does not know, with one line each', async () => {
    const run = (...args: string[]) =>
      exec(process.execPath, ['--import', 'tsx', 'scripts/token.ts', ...args], { cwd: ROOT, env });

    await expect(run('--sub', 'abc', '--scope', 'users:read')).rejects.toMatchObject({
      code: 1,
      stdout: '',
      stderr: '--sub must be a user id (a positive integer): the token\'s sub is the caller\'s user id (got "abc")\n',
    });
    await expect(run('--sub', '5', '--scope', 'users:read order:read')).rejects.toMatchObject({
      code: 1,
      stdout: '',
      stderr:
        '--scope names a scope the service does not know: "order:read" (known: admin users:read users:write orders:read orders:write products:read products:write webhooks:read webhooks:write)\n',
    });
  });

  it('answers --help with its usage, and an unknown option with an error and the usage', async () => {
    const { stdout } = await exec(process.execPath, ['--import', 'tsx', 'scripts/token.ts', '--help'], {
      cwd: ROOT,
      env,
    });
    const failed = exec(process.execPath, ['--import', 'tsx', 'scripts/token.ts', '--user', '5'], { cwd: ROOT, env });

    expect(stdout).toContain('usage: npm run -s token [-- options]');
    await expect(failed).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/Unknown option '--user'[\s\S]*usage: npm run -s token/),
    });
  });
});
