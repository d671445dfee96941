// The service's logger (docs/operations.md#logs): pino, JSON lines through logDestination or pretty
// lines for a terminal, with credentials taken out of every line before it is written.
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { Config } from './config/config.js';
import { logDestination } from './log-destination.js';
import { REDACTED, redactCredentials } from './log-redaction.js';

/** pino's options for the service's lines (the tests' loggers use them too). */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: REDACTED },
    // Applied to each serialized line, whichever field carries a URL (log-redaction.ts).
    hooks: { streamWrite: redactCredentials },
  };
}

export interface ServiceLogger {
  logger: Logger;
  /** Lines stdout did not take in time and that were dropped (log-destination.ts). */
  droppedLines: () => number;
}

export function createLogger(config: Config): ServiceLogger {
  const options = loggerOptions(config.logLevel);
  if (config.logFormat === 'pretty') {
    const logger = pino({
      ...options,
      transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
    });
    return { logger, droppedLines: () => 0 };
  }
  // Asynchronous, buffered writes: the lines of one event-loop turn are joined, and batches wait
  // until 48 KiB have gathered or 100 ms have passed, then go out in one write(2); a busy process
  // makes one write per batch, not one per request. What is buffered is flushed when the process
  // exits; a kill -9 loses at most the last 100 ms. A stdout that stalls costs at most
  // MAX_BUFFERED_BYTES: later lines are dropped, counted and told in a warn line.
  const destination = logDestination(1, {
    onDropped: (lines) =>
      logger.warn(
        { droppedLines: lines },
        `${lines} log lines dropped: standard output did not take them in time (log_lines_dropped_total counts them all)`,
      ),
  });
  const logger = pino(options, destination);
  return { logger, droppedLines: () => destination.droppedLines };
}
