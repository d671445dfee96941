// The process: config → database → migrations → app → listen, and a graceful stop on
// SIGTERM/SIGINT (docs/configuration.md): stop accepting, let in-flight requests finish, close idle
// keep-alive sockets, close the pool, exit 0; exit 1 if that takes longer than the deadline.
import { readFileSync } from 'node:fs';
import closeWithGrace from 'close-with-grace';
import { pino, type Logger } from 'pino';
import { buildApp } from './app.js';
import { tokenCommand, withDevelopmentSecret } from './auth/dev-secret.js';
import { ConfigError, loadConfig, type Config } from './config/config.js';
import { createDatabase } from './db/create-database.js';
import { DataDirInUse } from './db/data-dir-lock.js';
import { prepareDatabase } from './db/migrate.js';
import { createReplicaSet } from './db/replicas.js';
import { warmUp } from './db/prepared.js';
import { startMetricsServer } from './http/metrics.js';
import { logDestination } from './log-destination.js';
import { startTracing, type Tracing } from './tracing/tracing.js';

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

export function createLogger(config: Config): Logger {
  const options = {
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
  };
  if (config.logFormat === 'pretty') {
    return pino({
      ...options,
      transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
    });
  }
  // Asynchronous, buffered writes: the lines of one event-loop turn are joined, and batches wait
  // until 48 KiB have gathered or 100 ms have passed, then go out in one write(2); a busy process
  // makes one write per batch, not one per request (see docs/benchmark-log.md). What is buffered is
  // flushed when the process exits; a kill -9 loses at most the last 100 ms.
  return pino(options, logDestination());
}

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
  const logger = createLogger(config);
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

  const { db, engine, pool } = await createDatabase(config.database);
  const applied = await prepareDatabase(config.database, db);
  if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');
  const replicas = createReplicaSet(config.database, db, pool, {
    onDown: (replica, error) =>
      logger.warn({ replica: replica.name, err: error }, 'read replica unavailable: its reads go to the primary'),
  });
  const app = await buildApp({ config, db, logger, replicas });
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

  const address = await app.listen({ port: config.port, host: config.host });
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
