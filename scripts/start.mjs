// npm start: build when a source is newer than the last build, then run the server in this
// process (so SIGTERM and SIGINT reach it directly). Plain JavaScript: it runs before any build.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(fileURLToPath(import.meta.url), '..', '..');
const stamp = join(root, 'dist', '.tsbuildinfo');

function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

const built = newest(stamp);
const sources = Math.max(
  ...['src', 'scripts', 'tsconfig.json', 'tsconfig.build.json', 'package.json'].map((p) => newest(join(root, p))),
);
if (built === 0 || sources > built) {
  // Said on standard error, so that standard output holds only the server's log lines.
  const started = performance.now();
  process.stderr.write(`compiling the TypeScript sources into dist/ (tsc)${built === 0 ? ', the first time' : ''}…\n`);
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')],
    { stdio: 'inherit' },
  );
  process.stderr.write(`compiled in ${((performance.now() - started) / 1000).toFixed(1)} s; starting\n`);
}
await import(pathToFileURL(join(root, 'dist', 'src', 'server.js')).href);
