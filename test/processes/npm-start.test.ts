// `npm start` on a fresh clone (README's quick start): it says that it compiles, how long it took,
// and serves; a second start with nothing changed compiles nothing. Run in a copy of the
// repository's sources (its node_modules linked), so that its dist/ is its own.
import { spawn } from 'node:child_process';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { engine } from '../support/test-app.js';

const ROOT = join(import.meta.dirname, '..', '..');
/** The lines past their end of life that still run the service: 20 (machines that still ship it). */
const pastEndOfLife = process.versions.node.startsWith('20.');

/** Runs `node scripts/start.mjs` in `dir` until the service answers; what it wrote to stderr. */
async function start(dir: string, dataDir: string): Promise<{ stderr: string; live: number }> {
  const child = spawn(process.execPath, ['scripts/start.mjs'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'development', PORT: '0', LOG_FORMAT: 'json', DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        const at = /Server listening at (http:\/\/[^"\s]+)/.exec(stdout)?.[1];
        if (at !== undefined) resolve(at);
      });
      child.on('exit', (code) => reject(new Error(`exited ${String(code)}: ${stderr}`)));
    });
    const live = (await fetch(`${url}/api/public/health/live`)).status;
    return { stderr, live };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

describe.runIf(engine === 'pglite')('npm start on a fresh clone', () => {
  const dirs: string[] = [];
  afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('says it compiles and how long it took, serves, and compiles nothing the second time', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'resource-api-clone-'));
    dirs.push(dir);
    for (const part of ['src', 'scripts', 'config', 'package.json'])
      await cp(join(ROOT, part), join(dir, part), { recursive: true });
    await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    const data = join(dir, 'data');

    const first = await start(dir, data);
    const second = await start(dir, data);

    // On a line past its end of life (Node.js 20 since 2026-04-30), one line says so first.
    const endOfLife = pastEndOfLife
      ? `Node.js ${process.version} is past its end of life (2026-04-30): fine for development, not for production; the supported lines are 22, 24 and 26 (docs/deployment.md, "Runtime policy")\n`
      : '';
    expect(first.stderr.startsWith(endOfLife)).toBe(true);
    expect(first.stderr.slice(endOfLife.length)).toMatch(
      /^compiling \d+ TypeScript files into dist\/ \(esbuild, no type-check\)…\ncompiled in \d+\.\d s; starting\n/,
    );
    expect(first.stderr.split('end of life')).toHaveLength(pastEndOfLife ? 2 : 1);
    expect(second.stderr).toBe(endOfLife);
    expect(first.live).toBe(200);
    expect(second.live).toBe(200);
  }, 60_000);
});
