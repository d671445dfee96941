// buildTestApp(): the real app on a database of its own: a fresh in-memory PGlite, or a fresh
// schema in TEST_DATABASE_URL, migrated with the real migrations. Closed after its describe or
// file; one built inside a test or a hook (where an afterAll never runs) after the file
// (test/support/close-apps.ts), or sooner by the test's own close().
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import postgres from 'postgres';
import { pino } from 'pino';
import { afterAll, expect } from 'vitest';
import { buildApp, type BuildAppOptions } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { createDatabase } from '../../src/db/create-database.js';
import { prepareDatabase } from '../../src/db/migrate.js';
import { loggerOptions } from '../../src/logger.js';
import { openApps } from './app-registry.js';
import { openapiConformance, violations } from './openapi-conformance.js';

export const TEST_JWT_SECRET = 'test-secret-that-is-at-least-32-characters-long';
/** ENCRYPTION_KEY of the tests' apps and service processes (base64 of 32 bytes). */
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString('base64');

export type Engine = 'pglite' | 'postgres';
export const engine: Engine = process.env.TEST_ENGINE === 'postgres' ? 'postgres' : 'pglite';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  /** Log lines the app wrote (JSON objects), for tests that check logging. */
  logs: Record<string, unknown>[];
  /**
   * Closes the app, drops its database and checks its answers against the OpenAPI document (once;
   * later calls wait for the first). buildTestApp's afterAll calls it, or, for an app built inside
   * a test or a hook, the file's (test/support/close-apps.ts); a test may call it sooner
   * (onTestFinished) to free the app's connections.
   */
  close: () => Promise<void>;
}

/**
 * PostgreSQL as the tests reach it: TEST_DATABASE_URL, and behind a pooler in transaction mode
 * (TEST_DATABASE_POOLER=transaction, as .ci/run's PgBouncer pass sets it) the direct connection
 * TEST_DATABASE_DIRECT_URL for what needs a session (creating databases, session locks).
 */
export const testPostgres = {
  url: process.env.TEST_DATABASE_URL || undefined,
  directUrl: process.env.TEST_DATABASE_DIRECT_URL || process.env.TEST_DATABASE_URL || undefined,
  pooler: process.env.TEST_DATABASE_POOLER === 'transaction' ? ('transaction' as const) : ('none' as const),
};

/** `url` with its database name replaced by `database`. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** The variables that point a service process at `database` on the test PostgreSQL. */
export function databaseEnv(database: string): Record<string, string> {
  if (testPostgres.url === undefined || testPostgres.directUrl === undefined) return {};
  return {
    DATABASE_URL: withDatabase(testPostgres.url, database),
    DATABASE_DIRECT_URL: withDatabase(testPostgres.directUrl, database),
    DATABASE_POOLER: testPostgres.pooler,
  };
}

export function testConfig(env: Record<string, string | undefined> = {}): Config {
  // A test that names its own database (a private cluster) gets no pooler settings of the suite's.
  const suiteDatabase = engine === 'postgres' && env.DATABASE_URL === undefined;
  return loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: engine === 'postgres' ? testPostgres.url : 'memory://',
    DATABASE_DIRECT_URL: suiteDatabase ? testPostgres.directUrl : undefined,
    DATABASE_POOLER: suiteDatabase ? testPostgres.pooler : undefined,
    JWT_SECRET: TEST_JWT_SECRET,
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    // A test file makes more requests a minute than a quota allows; the rate-limit tests turn
    // quotas on with their own values.
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
    // Deliveries only where a test receives them (test/events/webhook-deliveries.test.ts): no other
    // file's subscription may ever be sent anywhere.
    WEBHOOK_DISPATCHER: 'false',
    ...env,
  });
}

export interface TestAppOptions extends Pick<
  BuildAppOptions,
  'plugins' | 'resolveHost' | 'eventStream' | 'mail' | 'auth' | 'logLinesDropped' | 'loopBusy'
> {
  /**
   * PostgreSQL only: a front of the test's own between the app's pool and its database (a relay
   * that can stop answering): given DATABASE_URL, the URL to use instead. Migrations and the
   * LISTEN session keep the database's own address (DATABASE_DIRECT_URL).
   */
  front?: (url: string) => Promise<string>;
}

export async function buildTestApp(
  env: Record<string, string | undefined> = {},
  options: TestAppOptions = {},
): Promise<TestApp> {
  let config = testConfig(env);
  // A file's own schema; behind a transaction pooler, which cannot carry a search_path, its own
  // database instead.
  const isolated = config.database.kind === 'postgres' ? `test_${randomBytes(6).toString('hex')}` : undefined;
  const database =
    isolated !== undefined && env.DATABASE_URL === undefined && testPostgres.pooler === 'transaction'
      ? isolated
      : undefined;
  const schema = database === undefined ? isolated : undefined;
  if (database !== undefined) {
    const admin = postgres(testPostgres.directUrl!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${database}`);
    await admin.end();
    config = testConfig({ ...databaseEnv(database), ...env });
  }
  const { front, auth, ...others } = options;
  if (front !== undefined && config.database.kind === 'postgres') {
    const { url, directUrl, pooler } = config.database;
    config = testConfig({
      ...env,
      DATABASE_URL: await front(url),
      DATABASE_DIRECT_URL: directUrl,
      DATABASE_POOLER: pooler,
    });
  }
  const { db, saveImage } = await createDatabase(config.database, schema ? { schema } : {});
  await prepareDatabase(config.database, db, schema ? { schema } : {});
  await saveImage?.(); // the next file's database starts from it (src/db/pglite-image.ts)

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
    logger: pino(loggerOptions('info'), sink),
    auth: { jwksCooldownMs: 1000, ...auth },
    observers: [openapiConformance],
    ...others,
  });

  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= (async () => {
      openApps.delete(close);
      // Every step, whatever the one before did: a failed app.close() still drops the database.
      const errors: unknown[] = [];
      const step = async (run: () => Promise<unknown>) => {
        try {
          await run();
        } catch (error) {
          errors.push(error);
        }
      };
      await step(() => app.close());
      await step(() => db.destroy());
      const { directUrl } = config.database.kind === 'postgres' ? config.database : { directUrl: undefined };
      if (schema && directUrl !== undefined)
        await step(async () => {
          const sql = postgres(directUrl, { max: 1, onnotice: () => {} });
          await sql.unsafe(`drop schema if exists ${schema} cascade`);
          await sql.end();
        });
      if (database !== undefined)
        await step(async () => {
          const sql = postgres(testPostgres.directUrl!, { max: 1, onnotice: () => {} });
          await sql.unsafe(`drop database if exists ${database} with (force)`);
          await sql.end();
        });
      if (errors.length > 0)
        throw errors.length === 1 ? errors[0] : new AggregateError(errors, 'closing a test app failed');
      // Every answer this app received matched the OpenAPI document (test/support/openapi-conformance.ts),
      // checked after the clean-up so that a failure here leaves nothing open.
      expect(violations(app), 'answers that the OpenAPI document does not describe').toEqual([]);
    })());
  // After the file's tests, or its describe's (registered while the file is collected); an
  // afterAll registered inside a running test or hook never runs: the registry's closes those.
  openApps.add(close);
  afterAll(close);
  return { app, config, logs, close };
}
