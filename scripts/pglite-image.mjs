// npm install (postinstall): makes the images a new embedded database starts from
// (scripts/pglite-image.ts, run through tsx). Plain JavaScript, and it never fails the install:
// where tsx is not installed (an install without dev dependencies), this file is not there yet
// (an image build that copies package.json first: the postinstall imports it and ignores its
// absence), or the image cannot be made, the first new database runs initdb and the migrations
// instead.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

try {
  createRequire(import.meta.url).resolve('tsx');
  const script = fileURLToPath(new URL('pglite-image.ts', import.meta.url));
  const made = spawnSync(process.execPath, ['--import', 'tsx', script], { stdio: 'inherit' });
  if (made.status !== 0) console.warn('resource-api: the PGlite images were not made; a first start runs initdb');
} catch {
  // no tsx: nothing to do
}
