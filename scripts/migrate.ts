// npm run migrate: apply pending migrations to the configured database and exit (from the build,
// node dist/scripts/migrate.js, where the development dependencies are not installed).
import { ConfigError, loadConfig } from '../src/config/config.js';
import { createDatabase } from '../src/db/create-database.js';
import { DataDirInUse } from '../src/db/data-dir-lock.js';
import { prepareDatabase } from '../src/db/migrate.js';

try {
  const config = loadConfig(process.env);
  const { db, engine } = await createDatabase(config.database);
  try {
    // As the server does at start-up: over DATABASE_DIRECT_URL when a pooler is in front.
    const applied = await prepareDatabase(config.database, db);
    console.log(applied.length > 0 ? `${engine}: applied ${applied.join(', ')}` : `${engine}: up to date`);
  } finally {
    await db.destroy();
  }
} catch (error) {
  console.error(error instanceof ConfigError || error instanceof DataDirInUse ? error.message : error);
  process.exit(1);
}
