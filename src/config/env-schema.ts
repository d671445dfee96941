// Every environment variable the service reads (docs/configuration.md), with the rule a bad value
// breaks: the schema config.ts validates against, and the error line names.
import { Type, type Static } from 'typebox';

export const NODE_ENVS = ['development', 'test', 'production'] as const;
export type NodeEnv = (typeof NODE_ENVS)[number];

const Port = (description: string) => Type.Integer({ minimum: 0, maximum: 65535, description });
const Text = (description: string) => Type.String({ minLength: 1, description });
const Millis = () => Type.Integer({ minimum: 1, maximum: 3_600_000, description: 'milliseconds, from 1 to 3600000' });

/** Every variable the service reads, with the rule a bad value breaks (used in the error line). */
export const EnvSchema = Type.Object({
  NODE_ENV: Type.Union(
    NODE_ENVS.map((e) => Type.Literal(e)),
    { description: 'one of development, test, production' },
  ),
  PORT: Port('an integer from 0 to 65535'),
  HOST: Text('a host name or address to listen on'),
  DATABASE_URL: Type.Optional(
    Type.String({
      pattern: '^(postgres(ql)?://.+|memory://)$',
      description: 'a postgres:// or postgresql:// URL, or memory://',
    }),
  ),
  DATA_DIR: Text('a directory path'),
  DATABASE_POOL_SIZE: Type.Integer({ minimum: 1, maximum: 100, description: 'an integer from 1 to 100' }),
  CORS_ALLOWED_ORIGINS: Type.String({ description: 'comma-separated origins or origin patterns' }),
  JWT_SECRET: Type.Optional(Type.String({ minLength: 32, description: 'a secret of at least 32 characters' })),
  ENCRYPTION_KEY: Type.Optional(
    Type.String({ description: 'base64 of 32 random bytes (make one with: openssl rand -base64 32)' }),
  ),
  ENCRYPTION_KEY_PREVIOUS: Type.Optional(
    Type.String({ description: 'base64 of 32 random bytes (make one with: openssl rand -base64 32)' }),
  ),
  JWT_PUBLIC_KEY: Type.Optional(
    Type.String({
      pattern: '-----BEGIN PUBLIC KEY-----',
      description: 'a PEM public key (-----BEGIN PUBLIC KEY-----)',
    }),
  ),
  JWT_JWKS_URL: Type.Optional(Type.String({ pattern: '^https?://', description: 'an http(s) URL of a JWKS document' })),
  JWT_ISSUER: Type.Optional(Text('a non-empty issuer')),
  JWT_AUDIENCE: Type.Optional(Text('a non-empty audience')),
  BASE_URL: Type.String({ pattern: '^https?://[^/]+(/.*)?$', description: 'an absolute http(s) URL' }),
  ERROR_TYPE_BASE: Type.String({ pattern: '^[a-zA-Z][a-zA-Z0-9+.-]*:.+', description: 'an absolute URI' }),
  API_VENDOR: Type.String({
    pattern: '^[a-z0-9][a-z0-9.-]*$',
    description: 'a lowercase media-type vendor name such as resource-api',
  }),
  TRUST_PROXY: Type.String({
    pattern: '^(true|false|\\d{1,2}|[0-9A-Fa-f:.]+(/\\d{1,3})?(\\s*,\\s*[0-9A-Fa-f:.]+(/\\d{1,3})?)*)$',
    description:
      'true (one proxy), false, a number of proxies in front, or a comma-separated list of proxy addresses or CIDRs',
  }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { description: 'a pino level (fatal, error, warn, info, debug, trace, silent)' },
  ),
  LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], { description: 'json or pretty' }),
  METRICS_PORT: Type.Optional(Port('an integer from 0 to 65535')),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({
    minimum: 100,
    maximum: 600_000,
    description: 'milliseconds, from 100 to 600000',
  }),
  RATE_LIMIT_PER_MINUTE: Type.Integer({
    minimum: 0,
    maximum: 1_000_000_000,
    description: 'an integer from 0 (off) to 1000000000',
  }),
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: Type.Integer({
    minimum: 0,
    maximum: 1_000_000_000,
    description: 'an integer from 0 (off) to 1000000000',
  }),
  IDEMPOTENCY_TTL_HOURS: Type.Number({
    exclusiveMinimum: 0,
    maximum: 8760,
    description: 'a number of hours above 0, at most 8760',
  }),
  EVENT_RETENTION_DAYS: Type.Number({
    exclusiveMinimum: 0,
    maximum: 3650,
    description: 'a number of days above 0, at most 3650',
  }),
  EVENT_STREAMS_PER_CALLER: Type.Integer({ minimum: 1, maximum: 1000, description: 'an integer from 1 to 1000' }),
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: Type.Boolean({ description: 'true or false' }),
  WEBHOOK_DISPATCHER: Type.Boolean({ description: 'true or false' }),
  WEBHOOK_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 25_000, description: 'milliseconds from 100 to 25000' }),
  WEBHOOK_POLL_MS: Type.Integer({ minimum: 10, maximum: 60_000, description: 'milliseconds from 10 to 60000' }),
  WEBHOOK_MAX_IN_FLIGHT: Type.Integer({ minimum: 1, maximum: 128, description: 'an integer from 1 to 128' }),
  WEBHOOK_RETRY_SCHEDULE: Type.String({
    pattern: '^\\d+(ms|s|m|h)(,\\d+(ms|s|m|h)){0,19}$',
    description: 'a comma-separated list of 1 to 20 durations such as 5s,5m,2h (ms, s, m or h)',
  }),
  WEBHOOK_SECRET_OVERLAP_HOURS: Type.Number({
    minimum: 0,
    maximum: 720,
    description: 'a number of hours from 0 to 720',
  }),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://.+', description: 'a redis:// or rediss:// URL' })),
  REQUEST_TIMEOUT_MS: Millis(),
  HEADERS_TIMEOUT_MS: Millis(),
  KEEP_ALIVE_TIMEOUT_MS: Millis(),
  DATABASE_STATEMENT_TIMEOUT_MS: Millis(),
  DATABASE_IDLE_TRANSACTION_TIMEOUT_MS: Millis(),
  DATABASE_POOLER: Type.Union([Type.Literal('none'), Type.Literal('transaction')], {
    description: 'none or transaction',
  }),
  DATABASE_DIRECT_URL: Type.Optional(
    Type.String({ pattern: '^postgres(ql)?://.+', description: 'a postgres:// or postgresql:// URL' }),
  ),
  DATABASE_REPLICA_URLS: Type.Optional(
    Type.String({
      pattern: '^postgres(ql)?://[^,\\s]+(,\\s*postgres(ql)?://[^,\\s]+)*$',
      description: 'a comma-separated list of postgres:// or postgresql:// URLs',
    }),
  ),
  REPLICA_MAX_LAG_MS: Type.Integer({ minimum: 0, maximum: 3_600_000, description: 'milliseconds, from 0 to 3600000' }),
  DATABASE_QUEUE_TIMEOUT_MS: Type.Integer({
    minimum: 10,
    maximum: 600_000,
    description: 'milliseconds, from 10 to 600000',
  }),
  OVERLOAD_PROTECTION: Type.Boolean({ description: 'true or false' }),
  CONCURRENCY_LIMIT_MIN: Type.Integer({ minimum: 1, maximum: 100_000, description: 'an integer from 1 to 100000' }),
  CONCURRENCY_LIMIT_MAX: Type.Integer({ minimum: 1, maximum: 100_000, description: 'an integer from 1 to 100000' }),
  LATENCY_BUDGET_MS: Type.Integer({ minimum: 10, maximum: 60_000, description: 'milliseconds, from 10 to 60000' }),
  EVENT_LOOP_DELAY_LIMIT_MS: Type.Integer({
    minimum: 0,
    maximum: 60_000,
    description: 'milliseconds, from 0 (off) to 60000',
  }),
  SMTP_URL: Type.Optional(Type.String({ pattern: '^smtps?://.+', description: 'an smtp:// or smtps:// URL' })),
  SMTP_FROM: Text('a sender such as "Shop <no-reply@example.com>"'),
  PASSWORD_RESET_URL: Type.String({
    pattern: '^https?://[^\\s]*\\{token\\}',
    description: 'an absolute http(s) URL containing {token}',
  }),
  PASSWORD_RESET_TTL_MINUTES: Type.Integer({
    minimum: 1,
    maximum: 10_080,
    description: 'an integer number of minutes from 1 to 10080',
  }),
});
export type Env = Static<typeof EnvSchema>;
