// The TypeScript snippets of the READMEs and the guide compile under the repository's own
// compiler settings and, run against a service after the README's quick start, print what their
// `// prints:` comments say (`…` stands for what changes from run to run: ids, ETags). A block
// without an import is a fragment of a larger file (the webhook receiver's heart) and is left out.
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { engine } from '../support/test-app.js';
import { runWalkthrough, walkthroughSteps } from '../support/walkthrough.js';
import { startWalkthroughServer, type WalkthroughServer } from '../support/walkthrough-server.js';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const DOCS = ['README.md', 'clients/typescript/README.md', 'docs/api-guide.md'];

interface Snippet {
  doc: string;
  code: string;
}

async function snippets(): Promise<Snippet[]> {
  const found: Snippet[] = [];
  for (const doc of DOCS) {
    const text = await readFile(join(ROOT, doc), 'utf8');
    for (const match of text.matchAll(/```ts\n([\s\S]*?)```/g))
      if (/^import /m.test(match[1]!)) found.push({ doc, code: match[1]! });
  }
  return found;
}

/** What the `// prints:` comments of `code` promise, in order, as patterns of whole lines. */
function promised(code: string): RegExp[] {
  return [...code.matchAll(/\/\/ prints: (.*)$/gm)].map(
    (m) =>
      new RegExp(
        `^${m[1]!
          .trim()
          .split('…')
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('.+')}$`,
      ),
  );
}

// Once per CI run: it starts its own server on the embedded engine whatever the project.
describe.runIf(engine === 'pglite')('the snippets of the docs', async () => {
  if (engine !== 'pglite') return; // a skipped suite's body still runs at collection
  // Inside the repository, so that '@resource-api/client' resolves through the workspace's link
  // (.mts: ES modules, as the docs' own files are); under node_modules, out of lint's way.
  const dir = join(ROOT, 'node_modules', '.cache', 'resource-api-snippets', String(process.pid));
  const found = await snippets();
  const files = found.map((_, i) => join(dir, `snippet-${String(i)}.mts`));
  const walks: WalkthroughServer[] = [];
  afterAll(async () => {
    await Promise.all(walks.map((w) => w.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  it('are found: the client README’s and the guide’s', () => {
    expect(found.map((s) => s.doc)).toEqual(['clients/typescript/README.md', 'docs/api-guide.md']);
    for (const snippet of found) expect(promised(snippet.code).length, snippet.doc).toBeGreaterThan(1);
  });

  it('compile under the repository’s compiler settings', async () => {
    await mkdir(dir, { recursive: true });
    await Promise.all(found.map((s, i) => writeFile(files[i]!, s.code)));
    const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (path) => ts.sys.readFile(path));
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
    const program = ts.createProgram(files, { ...options, noEmit: true, incremental: false });
    const errors = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file === undefined || files.includes(d.file.fileName))
      .map((d) => {
        const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
        const index = d.file === undefined ? -1 : files.indexOf(d.file.fileName);
        return `${found[index]?.doc ?? '?'}:${String((where?.line ?? -1) + 1)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
    expect(errors).toEqual([]);
  }, 60_000);

  it('print what they say, run after the README’s quick start', async () => {
    const walk = await startWalkthroughServer();
    walks.push(walk);
    const readme = await runWalkthrough(
      walkthroughSteps(await readFile(join(ROOT, 'README.md'), 'utf8')),
      walk.env,
      walk.rewrite,
    );
    expect(readme.filter((step) => step.status !== 0)).toEqual([]);
    const { stdout: token } = await exec('npm', ['run', '-s', 'token'], { cwd: ROOT, env: walk.env });
    await mkdir(dir, { recursive: true });

    for (const [i, snippet] of found.entries()) {
      const file = join(dir, `run-${String(i)}.mts`);
      await writeFile(file, walk.rewrite(snippet.code));
      const { stdout } = await exec(process.execPath, ['--import', 'tsx', file], {
        cwd: ROOT,
        env: { ...walk.env, TOKEN: token.trim() },
      });
      const lines = stdout.trim().split('\n');
      expect(lines.length, snippet.doc).toBe(promised(snippet.code).length);
      promised(snippet.code).forEach((pattern, n) => expect(lines[n], snippet.doc).toMatch(pattern));
    }
  }, 90_000);
});
