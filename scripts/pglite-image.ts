// Makes the images a new embedded database starts from (src/db/pglite-image.ts): a cluster just
// initialized, and one migrated to the latest, so that the first `npm start` runs neither initdb
// nor the migrations. Run by `npm install` (through scripts/pglite-image.mjs); again by hand
// after a new migration if you like (`npx tsx scripts/pglite-image.ts`), else the first new
// in-memory database makes it.
import { loadConfig } from '../src/config/config.js';
import { createDatabase } from '../src/db/create-database.js';
import { prepareDatabase } from '../src/db/migrate.js';

const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: 'memory://' });
const { db, saveImage } = await createDatabase(config.database);
await prepareDatabase(config.database, db);
await saveImage?.();
await db.destroy();
