// DESIGN §1-2: the development secret is generated once into DATA_DIR, start-up says how to
// get a token, and `npm run token` prints one the service accepts.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { runServer } from './support/process.js';
import { engine } from './support/test-app.js';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');

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
    expect(server.logs.some((l) => l.level === 40 && String(l.msg).includes('npm run token -- --sub 1'))).toBe(true);
    expect(response.status).toBe(404);
    expect(await readFile(secretFile, 'utf8')).toBe(secret);
  });

  it('says how to use it when --sub is missing', async () => {
    const failed = exec(process.execPath, ['--import', 'tsx', 'scripts/token.ts'], { cwd: ROOT, env });

    await expect(failed).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('usage: npm run token -- --sub <user id>'),
    });
  });
});
