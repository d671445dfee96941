// npm run migrate / npm run token: the operator's commands. Where the development dependencies
// are installed (a checkout after npm install), from their TypeScript source through tsx, as
// before; where they are not (an image, or a tree after `npm prune --omit=dev`), from the build
// that `npm run build` wrote: dist/scripts/<command>.js. Plain JavaScript: it runs before any build.
//
//   node scripts/run.mjs migrate
//   node scripts/run.mjs token -- --sub 5 --scope "orders:read"
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const COMMANDS = ['migrate', 'token'];
const root = join(fileURLToPath(import.meta.url), '..', '..');
const [command] = process.argv.splice(2, 1); // what follows is the command's own arguments
if (!COMMANDS.includes(command)) {
  process.stderr.write(`usage: node scripts/run.mjs ${COMMANDS.join('|')} [options]\n`);
  process.exit(2);
}
const source = join(root, 'scripts', `${command}.ts`);
const built = join(root, 'dist', 'scripts', `${command}.js`);
let tsx;
try {
  tsx = await import('tsx/esm/api');
} catch {
  // no development dependencies: the build
}
if (tsx !== undefined && existsSync(source)) {
  tsx.register();
  await import(pathToFileURL(source).href);
} else if (existsSync(built)) {
  await import(pathToFileURL(built).href);
} else {
  process.stderr.write(
    `npm run ${command}: neither its build (dist/scripts/${command}.js: npm run build) nor tsx (npm install) is here\n`,
  );
  process.exit(1);
}
