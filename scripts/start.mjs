// npm start: transpile the TypeScript sources when one is newer than the last transpile, then
// run the server in this process (so SIGTERM and SIGINT reach it directly). Plain JavaScript: it
// runs before any build.
//
// It transpiles with esbuild, file by file and without type-checking (well under a second), as
// tsx does: a first start is ready in seconds. `npm run build` (tsc) type-checks and writes the
// same layout for production images; `npm run typecheck`, lint and CI check the types.
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';

// docs/deployment.md, "Runtime policy": the Node.js lines and their end of life. A line past it
// still runs the service (for development, on machines that still ship it), and says so once.
const END_OF_LIFE = { 18: '2025-04-30', 20: '2026-04-30', 22: '2027-04-30', 24: '2028-04-30', 26: '2029-04-30' };
const major = Number(process.versions.node.split('.')[0]);
const supported = Object.keys(END_OF_LIFE)
  .map(Number)
  .filter((line) => new Date(`${END_OF_LIFE[line]}T23:59:59Z`) >= new Date());
if (!supported.includes(major)) {
  const since = END_OF_LIFE[major] === undefined ? '' : ` (${END_OF_LIFE[major]})`;
  const lines = `${supported.slice(0, -1).join(', ')} and ${supported.at(-1)}`;
  process.stderr.write(
    `Node.js ${process.version} is past its end of life${since}: fine for development, not for production; the supported lines are ${lines} (docs/deployment.md, "Runtime policy")\n`,
  );
}

const root = join(fileURLToPath(import.meta.url), '..', '..');
const out = join(root, 'dist');
const stamp = join(out, '.transpiled');
// A build by `npm run build` (tsc) counts as well: a production image runs what it built.
const stamps = [stamp, join(out, '.tsbuildinfo')];
const SOURCES = ['src', 'scripts'];

/** Every file under `path` (a file or a directory), recursively. */
function files(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return [];
  if (!stat.isDirectory()) return [{ path, mtimeMs: stat.mtimeMs }];
  return readdirSync(path).flatMap((name) => files(join(path, name)));
}

const sources = SOURCES.flatMap((dir) => files(join(root, dir))).filter(
  ({ path }) => path.endsWith('.ts') && !path.endsWith('.test.ts') && !path.endsWith('.d.ts'),
);
const built = Math.max(0, ...stamps.map((path) => statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0));
const newest = Math.max(0, ...sources.map((file) => file.mtimeMs), statSync(join(root, 'package.json')).mtimeMs);
// No TypeScript source at all (an image holds only the build): nothing to compile.
if (sources.length > 0 && (built === 0 || newest > built)) {
  // Said on standard error, so that standard output holds only the server's log lines.
  const started = performance.now();
  process.stderr.write(`compiling ${sources.length} TypeScript files into dist/ (esbuild, no type-check)…\n`);
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    process.stderr.write(
      'esbuild is not installed: run `npm install` first (or `npm run build` and `node dist/src/server.js`)\n',
    );
    process.exit(1);
  }
  await esbuild.build({
    entryPoints: sources.map(({ path }) => relative(root, path)),
    absWorkingDir: root,
    outdir: out,
    outbase: '.',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    bundle: false,
    logLevel: 'warning',
  });
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  process.stderr.write(`compiled in ${((performance.now() - started) / 1000).toFixed(1)} s; starting\n`);
}
await import(pathToFileURL(join(out, 'src', 'server.js')).href);
