// npm run openapi [-- --out <file>]: writes the OpenAPI document the service serves at
// /api/public/openapi.json, without a server listening or a database to reach. The document
// is built by the app itself, so this file and the served one cannot differ.
// BASE_URL (the `servers` entry) and API_VENDOR are read from the environment as by the service.
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config/config.js';
import { createDatabase } from '../src/db/create-database.js';

const { values } = parseArgs({ options: { out: { type: 'string', default: 'openapi.json' } } });

// The document does not depend on the key or the database: an in-memory database that is never
// queried and a throwaway key let the app build anywhere, production settings or not.
const config = loadConfig({
  ...process.env,
  NODE_ENV: 'development',
  DATABASE_URL: 'memory://',
  JWT_SECRET: 'openapi-document-only-never-used-to-verify-a-token',
  ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  ENCRYPTION_KEY_PREVIOUS: undefined,
  JWT_JWKS_URL: undefined,
  REDIS_URL: undefined,
  JWT_PUBLIC_KEY: undefined,
});
const { db } = await createDatabase(config.database);
const app = await buildApp({ config, db });
await app.ready();
const document = `${JSON.stringify(app.swagger(), null, 2)}\n`;
await app.close();
await db.destroy();

if (values.out === '-') process.stdout.write(document);
else {
  await mkdir(dirname(values.out), { recursive: true });
  await writeFile(values.out, document);
  process.stderr.write(`wrote ${values.out} (${document.length} bytes)\n`);
}
