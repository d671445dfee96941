// A new embedded database starts from an image (src/db/pglite-image.ts, docs/configuration.md):
// migrated already, so a first start runs neither initdb nor the migrations; a DATA_DIR made
// from it keeps its own lock and its data.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createDatabase } from '../../src/db/create-database.js';
import { prepareDatabase } from '../../src/db/migrate.js';
import { migrationsKey, pgliteImagePath } from '../../src/db/pglite-image.js';
import { engine } from '../support/test-app.js';

const dir = mkdtempSync(join(tmpdir(), 'pglite-image-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const config = (env: Record<string, string>) => loadConfig({ NODE_ENV: 'test', ...env }).database;

/** A new in-memory database, migrated, its image kept: what the first one of a run does. */
async function ensureImage(): Promise<void> {
  const memory = config({ DATABASE_URL: 'memory://' });
  const { db, saveImage } = await createDatabase(memory);
  await prepareDatabase(memory, db);
  await saveImage?.();
  await db.destroy();
}

describe.runIf(engine === 'pglite')('a new embedded database', () => {
  it('starts from the image of one migrated to the latest: no migration is left to apply', async () => {
    await ensureImage();
    const memory = config({ DATABASE_URL: 'memory://' });

    const { db, saveImage } = await createDatabase(memory);
    const applied = await prepareDatabase(memory, db);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from users`.execute(db);
    await db.destroy();

    expect(existsSync(pgliteImagePath({ migrations: migrationsKey()! }))).toBe(true);
    expect(saveImage).toBeUndefined(); // it came from the image
    expect(applied).toEqual([]);
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('in a new DATA_DIR, starts from the image, holds its own lock, and keeps its data across a restart', async () => {
    await ensureImage();
    const dataDir = join(dir, 'data');
    const onDisk = config({ DATA_DIR: dataDir });

    const first = await createDatabase(onDisk);
    const applied = await prepareDatabase(onDisk, first.db);
    const lock = readFileSync(join(dataDir, 'pglite', 'resource-api.lock'), 'utf8');
    await sql`insert into products (sku, name, price) values ('IMG-1', 'From the image', 1)`.execute(first.db);
    await first.db.destroy();
    const again = await createDatabase(onDisk);
    const appliedAgain = await prepareDatabase(onDisk, again.db);
    const { rows } = await sql<{ sku: string }>`select sku from products`.execute(again.db);
    await again.db.destroy();

    expect(applied).toEqual([]);
    expect(first.saveImage).toBeUndefined(); // a DATA_DIR's cluster holds its lock: never an image
    expect(lock).toContain(String(process.pid));
    expect(appliedAgain).toEqual([]);
    expect(rows).toEqual([{ sku: 'IMG-1' }]);
  });
});
