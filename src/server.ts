// The process: config → database → migrations → app → listen, and a graceful stop on
// SIGTERM/SIGINT (docs/configuration.md): stop accepting, let in-flight requests finish, close idle
// keep-alive sockets, close the pool, exit 0; exit 1 if that takes longer than the deadline.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { tokenCommand, withDevelopmentSecret } from './auth/dev-secret.js';
import { ConfigError, loadConfig, type Config } from './config/config.js';
import { createDatabase } from './db/create-database.js';
import { DataDirInUse } from './db/data-dir-lock.js';
import { prepareDatabase } from './db/migrate.js';
import { createReplicaSet } from './db/replicas.js';
import { warmUp } from './db/prepared.js';
import { startMetricsServer } from './http/metrics.js';
import { createLogger } from './logger.js';
import { startTracing, type Tracing } from './tracing/tracing.js';

/**
 * The connections the kernel completes for the port before the process takes them: as many as it
 * allows (Linux caps it at net.core.somaxconn: 4096 by default since 5.4), as Go's net package
 * does, not Node's 511. Past the queue, a new connection's handshake is dropped and its client
 * tries again a second later: a load balancer's pool of thousands reopening at once (a deploy, a
 * failover), or a burst of new clients while the event loop is busy, would otherwise wait out
 * that second before the instance sees a byte of their requests (docs/operations.md#overload).
 */
const LISTEN_BACKLOG = 65_535;

/** The service's version, as its traces name it: package.json's, from src/ or from dist/src/. */
function packageVersion(): string {
  for (const path of ['../package.json', '../../package.json']) {
    try {
      return (JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      // not at this depth
    }
  }
  return 'unknown';
}
const VERSION = packageVersion();

async function main(): Promise<void> {
  const startedAt = performance.now();
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  // Tracing first: a protocol it does not serve stops the start with one line.
  let tracing: Tracing | undefined;
  try {
    tracing = startTracing(process.env, VERSION);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
  const { logger, droppedLines } = createLogger(config);
  // A failed export (the collector down or refusing) is told in the service's log, not lost.
  tracing?.logTo((fields, message) => logger.warn(fields, message));
  const dev = await withDevelopmentSecret(config);
  config = dev.config;
  if (dev.generated !== undefined) {
    logger.warn(
      { secretFile: dev.generated },
      `No JWT key is configured: tokens are signed with the development secret in ${dev.generated}. Get the development token (user 1, every scope) with: ${tokenCommand(process.env)}`,
    );
  }

  if (config.env === 'production' && config.database.kind === 'pglite') {
    // Fine for a demo (docs/deployment.md), not for production load: said once, at start.
    const how =
      config.database.dataDir === undefined
        ? 'with DATABASE_URL=memory://: running on the embedded engine (PGlite in this process, in memory, lost at exit)'
        : `without DATABASE_URL: running on the embedded engine (PGlite in this process, persisted under DATA_DIR ${config.dataDir})`;
    logger.warn(
      { engine: 'pglite', dataDir: config.database.dataDir ?? null },
      `NODE_ENV=production ${how}: fine for a demo, not for production load; set DATABASE_URL to a PostgreSQL server`,
    );
  }
  // Said before it is done, and written at once: opening a new embedded database and migrating
  // it keep the process busy for seconds, during which a buffered line would wait.
  logger.info(
    config.database.kind === 'pglite'
      ? {
          engine: 'pglite',
          dataDir: config.database.dataDir === undefined ? 'memory' : resolve(config.database.dataDir),
        }
      : { engine: 'postgres' },
    'opening the database and applying pending migrations',
  );
  logger.flush();
  const { db, engine, pool, saveImage } = await createDatabase(config.database);
  const applied = await prepareDatabase(config.database, db);
  if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');
  await saveImage?.(); // before anything is written: the next new database starts from it
  const replicas = createReplicaSet(config.database, db, pool, {
    onDown: (replica, error) =>
      logger.warn({ replica: replica.name, err: error }, 'read replica unavailable: its reads go to the primary'),
  });
  const app = await buildApp({ config, db, logger, replicas, logLinesDropped: droppedLines });
  // Every connection opened and its hot statements run, before the port opens (prepared.ts).
  const warmUpStarted = performance.now();
  await warmUp(db);
  const warmUpMs = Math.round(performance.now() - warmUpStarted);

  const metricsServer =
    config.metricsPort === undefined
      ? undefined
      : await startMetricsServer(app.metrics, config.metricsPort, config.host);

  closeWithGrace({ delay: config.shutdownTimeoutMs, logger }, async ({ signal, err }) => {
    if (err) logger.error({ err }, 'fatal error, shutting down');
    else logger.info({ signal }, 'shutting down');
    metricsServer?.close();
    metricsServer?.closeAllConnections();
    await app.close();
    await db.destroy();
    await tracing?.shutdown(); // the last spans go out
  });

  const address = await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  if (metricsServer !== undefined) {
    const { port } = metricsServer.address() as { port: number };
    logger.info({ url: `http://${config.host}:${port}/metrics` }, 'metrics listening');
  }
  logger.info(
    {
      engine,
      url: address,
      docs: `${config.baseUrl}/api/public/docs`,
      startupMs: Math.round(performance.now() - startedAt),
      warmUpMs,
    },
    'resource-api ready',
  );
}

await main().catch((error: unknown) => {
  if (error instanceof DataDirInUse) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  throw error;
});
