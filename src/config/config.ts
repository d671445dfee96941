// The runtime contract of docs/configuration.md: environment variables over per-NODE_ENV files in config/,
// validated once at start-up into a frozen Config. loadConfig is pure; only server.ts and the
// test helper call it, and nothing reads process.env at import time.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { parseEncryptionKey } from '../crypto/encryption.js';
import { EnvSchema, NODE_ENVS, type Env, type NodeEnv } from './env-schema.js';
import { ConfigError, deepFreeze, fail, nonEmpty, parseDurations, parseTrustProxy } from './parse.js';

export { EnvSchema, type NodeEnv } from './env-schema.js';
export { ConfigError } from './parse.js';

export interface Config {
  readonly env: NodeEnv;
  readonly port: number;
  readonly host: string;
  readonly database:
    | {
        readonly kind: 'postgres';
        readonly url: string;
        readonly poolSize: number;
        readonly statementTimeoutMs: number;
        readonly idleTransactionTimeoutMs: number;
        /** `transaction`: a pooler in transaction mode is in front (no prepared statements, no session state). */
        readonly pooler: 'none' | 'transaction';
        /** A direct connection to the primary for what needs a session (LISTEN, migrations). */
        readonly directUrl: string;
        /** Read replicas: GETs read there, once a replica has what their caller wrote. */
        readonly replicaUrls: readonly string[];
        /** A replica further behind than this is skipped. */
        readonly replicaMaxLagMs: number;
        /** How long a statement may wait for a free connection before it is refused (503). */
        readonly queueTimeoutMs: number;
      }
    | { readonly kind: 'pglite'; readonly dataDir: string | undefined };
  readonly dataDir: string;
  /**
   * Secrets at rest (crypto/encryption.ts): ENCRYPTION_KEY and, during a rotation,
   * ENCRYPTION_KEY_PREVIOUS, each base64 of 32 bytes. Unset outside production until
   * withDevelopmentSecrets fills it in from DATA_DIR.
   */
  readonly encryption: { readonly key: string | undefined; readonly previousKey: string | undefined };
  readonly corsAllowedOrigins: readonly string[];
  readonly jwt: {
    readonly secret: string | undefined;
    readonly publicKey: string | undefined;
    readonly jwksUrl: string | undefined;
    readonly issuer: string | undefined;
    readonly audience: string | undefined;
  };
  readonly baseUrl: string;
  readonly errorTypeBase: string;
  readonly apiVendor: string;
  /**
   * The proxies in front (docs/configuration.md): false, a number of hops (true is 1: the connecting peer),
   * or the proxies' addresses and CIDRs. The client address is the rightmost X-Forwarded-For entry
   * that is not a trusted proxy, never the leftmost, which the client writes.
   */
  readonly trustProxy: false | number | readonly string[];
  readonly logLevel: string;
  readonly logFormat: 'json' | 'pretty';
  readonly metricsPort: number | undefined;
  readonly shutdownTimeoutMs: number;
  /** docs/api-guide.md#rate-limits: requests per minute per caller and per anonymous address (0: off). */
  readonly rateLimit: {
    readonly perMinute: number;
    readonly anonymousPerMinute: number;
    readonly redisUrl: string | undefined;
  };
  /** docs/api-guide.md#safe-retries: how long an Idempotency-Key and its stored response are kept. */
  readonly idempotencyTtlHours: number;
  /** docs/webhooks.md: events are kept this many days, then purged in the background. */
  readonly eventRetentionDays: number;
  /** Event streams one caller (`sub`) may hold open on an instance at once. */
  readonly eventStreamsPerCaller: number;
  /** docs/webhooks.md: webhook URLs may reach private networks; how long a rotated secret still signs. */
  readonly webhooks: {
    readonly allowPrivateNetworks: boolean;
    readonly secretOverlapHours: number;
    /** Whether this instance sends deliveries (WEBHOOK_DISPATCHER). */
    readonly dispatch: boolean;
    readonly timeoutMs: number;
    readonly pollMs: number;
    /** The waits before each retry, in milliseconds. */
    readonly retryScheduleMs: readonly number[];
    /** Attempts open at once for one subscription, in one instance (WEBHOOK_MAX_IN_FLIGHT). */
    readonly maxInFlight: number;
  };
  /** Outgoing mail: SMTP_URL (unset: none), SMTP_FROM. */
  readonly mail: { readonly smtpUrl: string | undefined; readonly from: string };
  /** The password reset's link (`{token}` is replaced) and how long a token lasts. */
  readonly passwordReset: { readonly urlTemplate: string; readonly ttlMinutes: number };
  /** docs/operations.md#overload: the adaptive limit on requests in flight, its bounds and the budget. */
  readonly overload: {
    readonly enabled: boolean;
    readonly minLimit: number;
    readonly maxLimit: number;
    /** LATENCY_BUDGET_MS: what the instance answers within, or refuses (ms). */
    readonly budgetMs: number;
    /** The backstop: a mean event-loop delay past this refuses new requests (0: off). */
    readonly eventLoopDelayMs: number;
  };
  /** docs/api-guide.md#limits-and-time-outs: time-outs of requests and of PostgreSQL sessions. */
  readonly timeouts: {
    readonly requestMs: number;
    readonly headersMs: number;
    readonly keepAliveMs: number;
    readonly statementMs: number;
    readonly idleTransactionMs: number;
  };
}

/** What a production start lacks: its line alone, and its name and hint among others. */
const MISSING_IN_PRODUCTION = {
  jwt: {
    name: 'JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL)',
    hint: 'the key that checks tokens',
    alone: 'JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL) is required when NODE_ENV=production',
  },
  encryption: {
    name: 'ENCRYPTION_KEY',
    hint: 'ENCRYPTION_KEY: base64 of 32 random bytes, openssl rand -base64 32',
    alone:
      'ENCRYPTION_KEY is required when NODE_ENV=production: base64 of 32 random bytes (openssl rand -base64 32); it encrypts webhook secrets and stored answers in the database',
  },
};

/** Chosen from the mixed load (90% reads, 10% orders) on 2 cores: docs/benchmark-log.md. */
export const DEFAULT_POOL_SIZE = 8;

type Source = Record<string, string | undefined>;

/**
 * Builds the Config from the environment and the per-environment file settings.
 * An environment variable always wins over a file; an empty variable counts as unset.
 * Throws ConfigError whose message is one line naming the bad variable.
 */
export function loadConfig(env: Source, files: Record<NodeEnv, Source> = readConfigFiles()): Config {
  const nodeEnv = (nonEmpty(env.NODE_ENV) ?? 'development') as NodeEnv;
  if (!NODE_ENVS.includes(nodeEnv)) fail('NODE_ENV', EnvSchema.properties.NODE_ENV, env.NODE_ENV);
  const merged: Source = { ...files[nodeEnv] };
  for (const [key, value] of Object.entries(env)) if (nonEmpty(value) !== undefined) merged[key] = value;

  const port = merged.PORT ?? '8080';
  const baseUrl = merged.BASE_URL ?? `http://localhost:${port}`;
  const raw: Source = {
    NODE_ENV: nodeEnv,
    PORT: port,
    HOST: merged.HOST ?? '127.0.0.1',
    DATABASE_URL: merged.DATABASE_URL,
    DATA_DIR: merged.DATA_DIR ?? './data',
    DATABASE_POOL_SIZE: merged.DATABASE_POOL_SIZE ?? String(DEFAULT_POOL_SIZE),
    CORS_ALLOWED_ORIGINS: merged.CORS_ALLOWED_ORIGINS ?? '',
    JWT_SECRET: merged.JWT_SECRET,
    ENCRYPTION_KEY: merged.ENCRYPTION_KEY,
    ENCRYPTION_KEY_PREVIOUS: merged.ENCRYPTION_KEY_PREVIOUS,
    JWT_PUBLIC_KEY: merged.JWT_PUBLIC_KEY,
    JWT_JWKS_URL: merged.JWT_JWKS_URL,
    JWT_ISSUER: merged.JWT_ISSUER,
    JWT_AUDIENCE: merged.JWT_AUDIENCE,
    BASE_URL: baseUrl,
    ERROR_TYPE_BASE: merged.ERROR_TYPE_BASE ?? `${baseUrl.replace(/\/+$/, '')}/api/public/problems`,
    API_VENDOR: merged.API_VENDOR ?? 'resource-api',
    TRUST_PROXY: merged.TRUST_PROXY ?? 'false',
    LOG_LEVEL: merged.LOG_LEVEL ?? 'info',
    LOG_FORMAT: merged.LOG_FORMAT ?? 'json',
    METRICS_PORT: merged.METRICS_PORT,
    SHUTDOWN_TIMEOUT_MS: merged.SHUTDOWN_TIMEOUT_MS ?? '10000',
    RATE_LIMIT_PER_MINUTE: merged.RATE_LIMIT_PER_MINUTE ?? '600',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: merged.RATE_LIMIT_ANONYMOUS_PER_MINUTE ?? '60',
    REDIS_URL: merged.REDIS_URL,
    IDEMPOTENCY_TTL_HOURS: merged.IDEMPOTENCY_TTL_HOURS ?? '24',
    EVENT_RETENTION_DAYS: merged.EVENT_RETENTION_DAYS ?? '7',
    EVENT_STREAMS_PER_CALLER: merged.EVENT_STREAMS_PER_CALLER ?? '10',
    // docs/webhooks.md: private networks are reachable by default only in development.
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: merged.WEBHOOK_ALLOW_PRIVATE_NETWORKS ?? String(nodeEnv === 'development'),
    WEBHOOK_SECRET_OVERLAP_HOURS: merged.WEBHOOK_SECRET_OVERLAP_HOURS ?? '24',
    WEBHOOK_DISPATCHER: merged.WEBHOOK_DISPATCHER ?? 'true',
    WEBHOOK_TIMEOUT_MS: merged.WEBHOOK_TIMEOUT_MS ?? '10000',
    WEBHOOK_POLL_MS: merged.WEBHOOK_POLL_MS ?? '1000',
    WEBHOOK_MAX_IN_FLIGHT: merged.WEBHOOK_MAX_IN_FLIGHT ?? '8',
    WEBHOOK_RETRY_SCHEDULE: merged.WEBHOOK_RETRY_SCHEDULE ?? '5s,5m,30m,2h,5h,10h,10h',
    REQUEST_TIMEOUT_MS: merged.REQUEST_TIMEOUT_MS ?? '30000',
    HEADERS_TIMEOUT_MS: merged.HEADERS_TIMEOUT_MS ?? '10000',
    KEEP_ALIVE_TIMEOUT_MS: merged.KEEP_ALIVE_TIMEOUT_MS ?? '5000',
    DATABASE_STATEMENT_TIMEOUT_MS: merged.DATABASE_STATEMENT_TIMEOUT_MS ?? '10000',
    DATABASE_IDLE_TRANSACTION_TIMEOUT_MS: merged.DATABASE_IDLE_TRANSACTION_TIMEOUT_MS ?? '30000',
    DATABASE_POOLER: merged.DATABASE_POOLER ?? 'none',
    DATABASE_DIRECT_URL: merged.DATABASE_DIRECT_URL,
    DATABASE_REPLICA_URLS: merged.DATABASE_REPLICA_URLS,
    REPLICA_MAX_LAG_MS: merged.REPLICA_MAX_LAG_MS ?? '5000',
    DATABASE_QUEUE_TIMEOUT_MS: merged.DATABASE_QUEUE_TIMEOUT_MS ?? '1000',
    OVERLOAD_PROTECTION: merged.OVERLOAD_PROTECTION ?? 'true',
    CONCURRENCY_LIMIT_MIN: merged.CONCURRENCY_LIMIT_MIN ?? '8',
    CONCURRENCY_LIMIT_MAX: merged.CONCURRENCY_LIMIT_MAX ?? '1000',
    LATENCY_BUDGET_MS: merged.LATENCY_BUDGET_MS ?? '250',
    // The backstop refuses what cannot be answered in time: a turn of the loop late by the budget.
    EVENT_LOOP_DELAY_LIMIT_MS: merged.EVENT_LOOP_DELAY_LIMIT_MS ?? merged.LATENCY_BUDGET_MS ?? '250',
    SMTP_URL: merged.SMTP_URL,
    SMTP_FROM: merged.SMTP_FROM ?? 'resource-api <no-reply@localhost>',
    PASSWORD_RESET_URL:
      merged.PASSWORD_RESET_URL ?? `${baseUrl.replace(/\/+$/, '')}/api/public/password-reset#token={token}`,
    PASSWORD_RESET_TTL_MINUTES: merged.PASSWORD_RESET_TTL_MINUTES ?? '60',
  };
  const defined = Object.fromEntries(Object.entries(raw).filter(([, value]) => value !== undefined));

  const parsed = Value.Convert(EnvSchema, { ...defined }) as Record<string, unknown>; // Convert may write into its argument
  // Value.Convert turns "yes" into nothing useful; accept only the two spellings of a boolean.
  if (!['true', 'false'].includes(String(raw.WEBHOOK_DISPATCHER)))
    fail('WEBHOOK_DISPATCHER', EnvSchema.properties.WEBHOOK_DISPATCHER, raw.WEBHOOK_DISPATCHER);
  if (!['true', 'false'].includes(String(raw.WEBHOOK_ALLOW_PRIVATE_NETWORKS)))
    fail(
      'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
      EnvSchema.properties.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
      raw.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
    );
  for (const error of Value.Errors(EnvSchema, parsed)) {
    const name = error.instancePath.slice(1).split('/')[0] ?? '';
    fail(name, (EnvSchema.properties as Record<string, TSchema>)[name], raw[name]);
  }
  const e = parsed as Env;

  const origins = e.CORS_ALLOWED_ORIGINS.split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '');
  for (const origin of origins) {
    // docs/configuration.md: credentials are allowed, so a wildcard origin is refused outright.
    if (origin === '*')
      throw new ConfigError(
        'Invalid configuration: CORS_ALLOWED_ORIGINS must list origins; a lone "*" is refused because credentials are allowed',
      );
    if (!/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new ConfigError(
        `Invalid configuration: CORS_ALLOWED_ORIGINS entry "${origin}" must be an origin such as https://app.example.com or https://*.example.org`,
      );
    }
  }
  const keyCount = [e.JWT_SECRET, e.JWT_PUBLIC_KEY, e.JWT_JWKS_URL].filter((k) => k !== undefined).length;
  if (keyCount > 1)
    throw new ConfigError(
      'Invalid configuration: JWT_SECRET, JWT_PUBLIC_KEY and JWT_JWKS_URL are exclusive; set only one',
    );
  for (const name of ['ENCRYPTION_KEY', 'ENCRYPTION_KEY_PREVIOUS'] as const) {
    const value = e[name];
    if (value !== undefined && parseEncryptionKey(value) === undefined) fail(name, EnvSchema.properties[name], value);
  }
  // Every key production lacks, in one line: an operator who set none learns of both at once.
  if (nodeEnv === 'production') {
    const missing = [
      ...(keyCount === 0 ? [MISSING_IN_PRODUCTION.jwt] : []),
      ...(e.ENCRYPTION_KEY === undefined ? [MISSING_IN_PRODUCTION.encryption] : []),
    ];
    if (missing.length === 1) throw new ConfigError(`Invalid configuration: ${missing[0]?.alone ?? ''}`);
    if (missing.length > 1)
      throw new ConfigError(
        `Invalid configuration: ${missing.map((m) => m.name).join(' and ')} are required when NODE_ENV=production (${missing.map((m) => m.hint).join('; ')})`,
      );
  }

  if (e.CONCURRENCY_LIMIT_MAX < e.CONCURRENCY_LIMIT_MIN)
    throw new ConfigError(
      `Invalid configuration: CONCURRENCY_LIMIT_MAX must be at least CONCURRENCY_LIMIT_MIN (got ${e.CONCURRENCY_LIMIT_MAX} < ${e.CONCURRENCY_LIMIT_MIN})`,
    );
  const databaseUrl = e.DATABASE_URL;
  return deepFreeze({
    env: nodeEnv,
    port: e.PORT,
    host: e.HOST,
    database:
      databaseUrl !== undefined && databaseUrl !== 'memory://'
        ? {
            kind: 'postgres',
            url: databaseUrl,
            poolSize: e.DATABASE_POOL_SIZE,
            statementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
            idleTransactionTimeoutMs: e.DATABASE_IDLE_TRANSACTION_TIMEOUT_MS,
            pooler: e.DATABASE_POOLER,
            directUrl: e.DATABASE_DIRECT_URL ?? databaseUrl,
            replicaUrls: (e.DATABASE_REPLICA_URLS ?? '')
              .split(',')
              .map((u) => u.trim())
              .filter((u) => u !== ''),
            replicaMaxLagMs: e.REPLICA_MAX_LAG_MS,
            queueTimeoutMs: e.DATABASE_QUEUE_TIMEOUT_MS,
          }
        : { kind: 'pglite', dataDir: databaseUrl === 'memory://' ? undefined : e.DATA_DIR },
    dataDir: e.DATA_DIR,
    encryption: { key: e.ENCRYPTION_KEY, previousKey: e.ENCRYPTION_KEY_PREVIOUS },
    corsAllowedOrigins: origins,
    jwt: {
      secret: e.JWT_SECRET,
      publicKey: e.JWT_PUBLIC_KEY,
      jwksUrl: e.JWT_JWKS_URL,
      issuer: e.JWT_ISSUER,
      audience: e.JWT_AUDIENCE,
    },
    baseUrl: e.BASE_URL.replace(/\/+$/, ''),
    errorTypeBase: e.ERROR_TYPE_BASE.replace(/\/+$/, ''),
    apiVendor: e.API_VENDOR,
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    metricsPort: e.METRICS_PORT,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    rateLimit: {
      perMinute: e.RATE_LIMIT_PER_MINUTE,
      anonymousPerMinute: e.RATE_LIMIT_ANONYMOUS_PER_MINUTE,
      redisUrl: e.REDIS_URL,
    },
    idempotencyTtlHours: e.IDEMPOTENCY_TTL_HOURS,
    eventRetentionDays: e.EVENT_RETENTION_DAYS,
    eventStreamsPerCaller: e.EVENT_STREAMS_PER_CALLER,
    webhooks: {
      allowPrivateNetworks: e.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
      secretOverlapHours: e.WEBHOOK_SECRET_OVERLAP_HOURS,
      dispatch: e.WEBHOOK_DISPATCHER,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      pollMs: e.WEBHOOK_POLL_MS,
      retryScheduleMs: parseDurations(e.WEBHOOK_RETRY_SCHEDULE),
      maxInFlight: e.WEBHOOK_MAX_IN_FLIGHT,
    },
    mail: { smtpUrl: e.SMTP_URL, from: e.SMTP_FROM },
    passwordReset: { urlTemplate: e.PASSWORD_RESET_URL, ttlMinutes: e.PASSWORD_RESET_TTL_MINUTES },
    overload: {
      enabled: e.OVERLOAD_PROTECTION,
      minLimit: e.CONCURRENCY_LIMIT_MIN,
      maxLimit: e.CONCURRENCY_LIMIT_MAX,
      budgetMs: e.LATENCY_BUDGET_MS,
      eventLoopDelayMs: e.EVENT_LOOP_DELAY_LIMIT_MS,
    },
    timeouts: {
      requestMs: e.REQUEST_TIMEOUT_MS,
      headersMs: e.HEADERS_TIMEOUT_MS,
      keepAliveMs: e.KEEP_ALIVE_TIMEOUT_MS,
      statementMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
      idleTransactionMs: e.DATABASE_IDLE_TRANSACTION_TIMEOUT_MS,
    },
  } satisfies Config);
}

/** The settings files in config/, one per NODE_ENV; keys are the variable names. */
export function readConfigFiles(dir = join(import.meta.dirname, '..', '..', 'config')): Record<NodeEnv, Source> {
  const dirs = [dir, join(dir, '..', '..', 'config')]; // src/config/ when run from source, dist/src/config/ when built
  const read = (name: NodeEnv): Source => {
    for (const d of dirs) {
      try {
        return JSON.parse(readFileSync(join(d, `${name}.json`), 'utf8')) as Source;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
          throw new ConfigError(`Invalid configuration file config/${name}.json: ${(error as Error).message}`);
      }
    }
    return {};
  };
  return { development: read('development'), test: read('test'), production: read('production') };
}
