// The operator's commands where only the production dependencies are installed (an image, a tree
// after `npm prune --omit=dev`): `npm run migrate` and `npm run token` run from the build
// (dist/scripts/), not through tsx. Run in a copy of the repository holding package.json, config/,
// scripts/run.mjs and a build, whose node_modules links every installed package but tsx.
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engine } from '../support/test-app.js';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const SECRET = 'operator-commands-secret-operator-commands';

async function typescriptFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

describe.runIf(engine === 'pglite')('npm run migrate and npm run token without the development dependencies', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'resource-api-pruned-'));
    for (const part of ['package.json', 'config', 'scripts/run.mjs'])
      await cp(join(ROOT, part), join(dir, part), { recursive: true });
    // The build, as `npm run build` lays it out (esbuild here: the same files, in a second).
    await build({
      entryPoints: [...(await typescriptFiles(join(ROOT, 'src'))), ...(await typescriptFiles(join(ROOT, 'scripts')))],
      absWorkingDir: ROOT,
      outdir: join(dir, 'dist'),
      outbase: '.',
      format: 'esm',
      platform: 'node',
      target: 'node20',
      logLevel: 'warning',
    });
    await mkdir(join(dir, 'node_modules'));
    for (const name of await readdir(join(ROOT, 'node_modules')))
      if (name !== 'tsx' && name !== '.bin')
        await symlink(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name));
  }, 60_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const npm = (args: string[], env: Record<string, string>) =>
    exec('npm', ['run', '-s', ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'development', DATA_DIR: join(dir, 'data'), ...env },
    });

  it('migrates the embedded database from the build', async () => {
    const { stdout, stderr } = await npm(['migrate'], {});

    expect(stdout).toMatch(/^pglite: applied 0001_users, /);
    expect(stderr).toBe('');
    expect((await npm(['migrate'], {})).stdout).toBe('pglite: up to date\n');
  }, 60_000);

  it('prints a token signed with the configured key, and says why when there is none', async () => {
    const { stdout } = await npm(['token', '--', '--sub', '7', '--scope', 'orders:read'], { JWT_SECRET: SECRET });
    const refused = await npm(['token'], { DATA_DIR: join(dir, 'empty') }).catch((error: unknown) => error);

    const { payload } = await jwtVerify(stdout.trim(), new TextEncoder().encode(SECRET));
    expect(payload).toMatchObject({ sub: '7', scope: 'orders:read' });
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringMatching(/^No development secret in /) });
  }, 30_000);

  it('says in one line what is missing when there is no build either', async () => {
    await rm(join(dir, 'dist', 'scripts', 'migrate.js'));

    const refused = await npm(['migrate'], {}).catch((error: unknown) => error);

    expect(refused).toMatchObject({
      code: 1,
      stderr:
        'npm run migrate: neither its build (dist/scripts/migrate.js: npm run build) nor tsx (npm install) is here\n',
    });
  });
});
