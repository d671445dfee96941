// buildTestApp(): the real app on a database of its own: a fresh in-memory PGlite, or a fresh
// schema in TEST_DATABASE_URL, migrated with the real migrations. Closed after the file.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import postgres from 'postgres';
import { pino } from 'pino';
import { afterAll, expect } from 'vitest';
import { buildApp, type BuildAppOptions } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createDatabase } from '../../src/db/create-database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openapiConformance, violations } from './openapi-conformance.js';

export const TEST_JWT_SECRET = 'test-secret-that-is-at-least-32-characters-long';

export type Engine = 'pglite' | 'postgres';
export const engine: Engine = process.env.TEST_ENGINE === 'postgres' ? 'postgres' : 'pglite';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  /** Log lines the app wrote (JSON objects), for tests that check logging. */
  logs: Record<string, unknown>[];
}

export function testConfig(env: Record<string, string | undefined> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: engine === 'postgres' ? process.env.TEST_DATABASE_URL : 'memory://',
    JWT_SECRET: TEST_JWT_SECRET,
    // A test file makes more requests a minute than a quota allows; the rate-limit tests turn
    // quotas on with their own values.
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
    // Deliveries only where a test receives them (test/webhook-deliveries.test.ts): no other
    // file's subscription may ever be sent anywhere.
    WEBHOOK_DISPATCHER: 'false',
    ...env,
  });
}

export async function buildTestApp(
  env: Record<string, string | undefined> = {},
  options: Pick<BuildAppOptions, 'plugins' | 'resolveHost' | 'eventStream'> = {},
): Promise<TestApp> {
  const config = testConfig(env);
  const schema = config.database.kind === 'postgres' ? `test_${randomBytes(6).toString('hex')}` : undefined;
  const { db } = await createDatabase(config.database, schema ? { schema } : {});
  await migrateToLatest(db, schema);

  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // A short JWKS cooldown lets the key-rotation test run in a second instead of thirty.
  const app = await buildApp({
    config,
    db,
    logger: pino({ level: 'info' }, sink),
    auth: { jwksCooldownMs: 1000 },
    observers: [openapiConformance],
    ...options,
  });

  afterAll(async () => {
    // Every answer this file received matched the OpenAPI document (test/support/openapi-conformance.ts).
    expect(violations(app), 'answers that the OpenAPI document does not describe').toEqual([]);
    await app.close();
    await db.destroy();
    if (schema && config.database.kind === 'postgres') {
      const sql = postgres(config.database.url, { max: 1, onnotice: () => {} });
      await sql.unsafe(`drop schema if exists ${schema} cascade`);
      await sql.end();
    }
  });
  return { app, config, logs };
}
