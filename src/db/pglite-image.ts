// A new embedded database (memory://, or a DATA_DIR that holds none yet) starts from an image
// instead of running initdb and every migration, which were most of a first start's time
// (docs/configuration.md, DATA_DIR): the image of a cluster just initialized and migrated to the
// latest, for this PGlite version and these migrations, else the image of one just initialized.
// Images are kept in node_modules/.cache/resource-api/; `npm install` makes both
// (scripts/pglite-image.ts), and a new in-memory database that finds one missing makes it for
// the next: the initialized one at once, the migrated one once its migrations have run
// (saveImage, before anything else is written). Only in-memory databases make images: a
// DATA_DIR's cluster holds the directory's lock file, which must not travel. Without an image (a
// read-only install, or `npm ci --ignore-scripts` before any in-memory database), a new
// database runs initdb and the migrations as PGlite and Kysely do by themselves.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { PGlite as PGliteClass } from '@electric-sql/pglite';

const PACKAGE = join('node_modules', '@electric-sql', 'pglite');

/** The cache's directory and PGlite's version. */
function cache(): { dir: string; version: string } {
  // The package's directory, from its entry point (its package.json is not exported).
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const dir = entry.slice(0, entry.lastIndexOf(PACKAGE) + PACKAGE.length);
  const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string };
  return { dir: join(dir, '..', '..', '.cache', 'resource-api'), version };
}

/**
 * What the migrations' sources hash to (src/db/migrations/*.ts, found from src/ or dist/src/);
 * undefined where the sources are not at hand.
 */
export function migrationsKey(): string | undefined {
  for (const dir of [
    join(import.meta.dirname, 'migrations'),
    join(import.meta.dirname, '..', '..', '..', 'src', 'db', 'migrations'),
  ]) {
    try {
      const names = readdirSync(dir)
        .filter((name) => name.endsWith('.ts'))
        .sort();
      if (names.length === 0) continue; // dist/src/db/migrations: compiled, no sources
      const hash = createHash('sha256');
      for (const name of names) hash.update(`${name}\n`).update(readFileSync(join(dir, name)));
      return hash.digest('hex').slice(0, 16);
    } catch {
      // not at this depth
    }
  }
  return undefined;
}

/** The image of a cluster just initialized (`initialized`), or also migrated under `key`. */
export function pgliteImagePath(kind: 'initialized' | { migrations: string }): string {
  const { dir, version } = cache();
  return join(dir, kind === 'initialized' ? `pglite-${version}.tar.gz` : `pglite-${version}-${kind.migrations}.tar.gz`);
}

function read(path: string): Blob | undefined {
  try {
    return new Blob([readFileSync(path)]);
  } catch {
    return undefined; // none yet, or unreadable
  }
}

export interface OpenedPGlite {
  pglite: PGliteClass;
  /**
   * Set when the database is new and no image of it migrated was found: keeps one, to be called
   * once the migrations have run and before anything else is written.
   */
  saveImage?: () => Promise<void>;
}

/** Opens the database at `dataDir` (undefined: in memory), a new one from an image when there is one. */
export async function openPGlite(PGlite: typeof PGliteClass, dataDir: string | undefined): Promise<OpenedPGlite> {
  const fresh = dataDir === undefined || !existsSync(join(dataDir, 'PG_VERSION'));
  if (!fresh) return { pglite: await PGlite.create(dataDir) };
  const key = migrationsKey();
  const migratedPath = key === undefined ? undefined : pgliteImagePath({ migrations: key });
  const migrated = migratedPath === undefined ? undefined : read(migratedPath);
  if (migrated !== undefined) return { pglite: await PGlite.create(dataDir, { loadDataDir: migrated }) };
  const initializedPath = pgliteImagePath('initialized');
  const initialized = read(initializedPath);
  const pglite =
    initialized === undefined
      ? await PGlite.create(dataDir)
      : await PGlite.create(dataDir, { loadDataDir: initialized });
  if (dataDir !== undefined) return { pglite };
  if (initialized === undefined) await saveImage(pglite, initializedPath);
  return migratedPath === undefined ? { pglite } : { pglite, saveImage: () => saveImage(pglite, migratedPath) };
}

/** Best effort: a cache that cannot be written only costs the next new database the same work. */
export async function saveImage(pglite: PGliteClass, path: string): Promise<void> {
  try {
    const dump = await pglite.dumpDataDir('gzip');
    mkdirSync(dirname(path), { recursive: true });
    const partial = `${path}.${String(process.pid)}.partial`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, path); // whole or not at all, whoever writes it at the same time
  } catch {
    // left to the next new database
  }
}
