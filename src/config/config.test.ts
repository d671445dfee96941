import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_POOL_SIZE, loadConfig } from './config.js';

const noFiles = { development: {}, test: {}, production: {} };

const KEY = Buffer.alloc(32, 1).toString('base64'); // AQEB…

describe('loadConfig', () => {
  it('applies the defaults of docs/configuration.md', () => {
    const config = loadConfig({}, noFiles);

    expect(config).toMatchObject({
      env: 'development',
      port: 8080,
      host: '127.0.0.1',
      database: { kind: 'pglite', dataDir: './data' },
      dataDir: './data',
      corsAllowedOrigins: [],
      baseUrl: 'http://localhost:8080',
      errorTypeBase: 'http://localhost:8080/api/public/problems',
      apiVendor: 'resource-api',
      trustProxy: false,
      logLevel: 'info',
      metricsPort: undefined,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.database)).toBe(true);
  });

  it('derives BASE_URL from PORT and ERROR_TYPE_BASE from BASE_URL', () => {
    expect(loadConfig({ PORT: '9000' }, noFiles).errorTypeBase).toBe('http://localhost:9000/api/public/problems');
    expect(loadConfig({ BASE_URL: 'https://api.example.com/' }, noFiles).errorTypeBase).toBe(
      'https://api.example.com/api/public/problems',
    );
  });

  it('selects the engine from DATABASE_URL', () => {
    expect(loadConfig({ DATABASE_URL: 'memory://' }, noFiles).database).toEqual({ kind: 'pglite', dataDir: undefined });
    expect(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }, noFiles).database).toEqual({
      kind: 'postgres',
      url: 'postgresql://u@h/db',
      poolSize: DEFAULT_POOL_SIZE,
      statementTimeoutMs: 10_000,
      idleTransactionTimeoutMs: 30_000,
      pooler: 'none',
      directUrl: 'postgresql://u@h/db',
      replicaUrls: [],
      replicaMaxLagMs: 5000,
      queueTimeoutMs: 1000,
    });
    expect(loadConfig({ DATABASE_URL: 'postgres://u@h/db', DATABASE_POOL_SIZE: '8' }, noFiles).database).toMatchObject({
      poolSize: 8,
    });
  });

  it('reads the overload settings, and refuses a limit whose maximum is under its minimum', () => {
    expect(loadConfig({}, noFiles).overload).toEqual({
      enabled: true,
      minLimit: 8,
      maxLimit: 1000,
      budgetMs: 250,
      eventLoopDelayMs: 250,
    });
    expect(
      loadConfig(
        {
          OVERLOAD_PROTECTION: 'false',
          CONCURRENCY_LIMIT_MIN: '2',
          CONCURRENCY_LIMIT_MAX: '4',
          LATENCY_BUDGET_MS: '100',
        },
        noFiles,
      ).overload,
    ).toMatchObject({ enabled: false, minLimit: 2, maxLimit: 4, budgetMs: 100, eventLoopDelayMs: 100 });
    // The backstop's threshold follows the budget unless it is set.
    expect(loadConfig({ LATENCY_BUDGET_MS: '400', EVENT_LOOP_DELAY_LIMIT_MS: '150' }, noFiles).overload).toMatchObject({
      budgetMs: 400,
      eventLoopDelayMs: 150,
    });
    expect(() => loadConfig({ LATENCY_BUDGET_MS: '5' }, noFiles)).toThrow(/LATENCY_BUDGET_MS/);
    expect(() => loadConfig({ CONCURRENCY_LIMIT_MIN: '10', CONCURRENCY_LIMIT_MAX: '5' }, noFiles)).toThrow(
      'Invalid configuration: CONCURRENCY_LIMIT_MAX must be at least CONCURRENCY_LIMIT_MIN (got 5 < 10)',
    );
  });

  it('lets an environment variable win over the file for its NODE_ENV', () => {
    const files = {
      ...noFiles,
      production: { LOG_FORMAT: 'json', LOG_LEVEL: 'warn' },
      development: { LOG_FORMAT: 'pretty' },
    };

    const config = loadConfig(
      { NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(32), ENCRYPTION_KEY: KEY, LOG_LEVEL: 'debug' },
      files,
    );

    expect(config.logLevel).toBe('debug');
    expect(config.logFormat).toBe('json');
    expect(loadConfig({}, files).logFormat).toBe('pretty');
  });

  it('splits CORS_ALLOWED_ORIGINS and refuses a lone *', () => {
    expect(
      loadConfig({ CORS_ALLOWED_ORIGINS: 'https://a.example.com, https://*.example.org' }, noFiles).corsAllowedOrigins,
    ).toEqual(['https://a.example.com', 'https://*.example.org']);
    expect(() => loadConfig({ CORS_ALLOWED_ORIGINS: '*' }, noFiles)).toThrow(
      /CORS_ALLOWED_ORIGINS.*lone "\*" is refused/,
    );
    expect(() => loadConfig({ CORS_ALLOWED_ORIGINS: 'example.com' }, noFiles)).toThrow(
      /CORS_ALLOWED_ORIGINS entry "example.com"/,
    );
  });

  it('refuses to start in production without a key', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', ENCRYPTION_KEY: KEY }, noFiles)).toThrow(
      new ConfigError(
        'Invalid configuration: JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL) is required when NODE_ENV=production',
      ),
    );
    expect(
      loadConfig({ NODE_ENV: 'production', JWT_SECRET: 's'.repeat(32), ENCRYPTION_KEY: KEY }, noFiles).jwt.secret,
    ).toBe('s'.repeat(32));
  });

  it('names every key a production start lacks in one line', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' }, noFiles)).toThrow(
      new ConfigError(
        'Invalid configuration: JWT_SECRET (or JWT_PUBLIC_KEY or JWT_JWKS_URL) and ENCRYPTION_KEY are required when NODE_ENV=production (the key that checks tokens; ENCRYPTION_KEY: base64 of 32 random bytes, openssl rand -base64 32)',
      ),
    );
  });

  it('refuses to start in production without ENCRYPTION_KEY, and any environment with a key that is not 32 bytes', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', JWT_SECRET: 's'.repeat(32) }, noFiles)).toThrow(
      /^Invalid configuration: ENCRYPTION_KEY is required when NODE_ENV=production/,
    );
    for (const bad of ['c2hvcnQ=', Buffer.alloc(33).toString('base64'), 'not base64!']) {
      expect(() => loadConfig({ ENCRYPTION_KEY: bad }, noFiles)).toThrow(
        new ConfigError(
          'Invalid configuration: ENCRYPTION_KEY must be base64 of 32 random bytes (make one with: openssl rand -base64 32) (got (hidden))',
        ),
      );
    }
    expect(() => loadConfig({ ENCRYPTION_KEY: KEY, ENCRYPTION_KEY_PREVIOUS: 'c2hvcnQ=' }, noFiles)).toThrow(
      /ENCRYPTION_KEY_PREVIOUS must be base64 of 32 random bytes/,
    );
    const both = loadConfig(
      { ENCRYPTION_KEY: KEY, ENCRYPTION_KEY_PREVIOUS: KEY.replace('A', 'B') },
      noFiles,
    ).encryption;
    expect(both).toEqual({ key: KEY, previousKey: KEY.replace('A', 'B') });
  });

  it.each([
    [{ PORT: 'eighty' }, 'Invalid configuration: PORT must be an integer from 0 to 65535 (got "eighty")'],
    [{ PORT: '70000' }, 'Invalid configuration: PORT must be an integer from 0 to 65535 (got "70000")'],
    [
      { NODE_ENV: 'staging' },
      'Invalid configuration: NODE_ENV must be one of development, test, production (got "staging")',
    ],
    [
      { DATABASE_URL: 'mysql://x' },
      'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL, or memory:// (got "mysql://x")',
    ],
    [
      { DATABASE_POOL_SIZE: '0' },
      'Invalid configuration: DATABASE_POOL_SIZE must be an integer from 1 to 100 (got "0")',
    ],
    [
      { TRUST_PROXY: 'yes' },
      'Invalid configuration: TRUST_PROXY must be true (one proxy), false, a number of proxies in front, or a comma-separated list of proxy addresses or CIDRs (got "yes")',
    ],
    [
      { TRUST_PROXY: '10.0.0.1,10.0.0.300' },
      'Invalid configuration: TRUST_PROXY entry "10.0.0.300" must be an IP address or a CIDR such as 10.0.0.0/8',
    ],
    [
      { LOG_LEVEL: 'loud' },
      'Invalid configuration: LOG_LEVEL must be a pino level (fatal, error, warn, info, debug, trace, silent) (got "loud")',
    ],
    [
      { JWT_SECRET: 'short' },
      'Invalid configuration: JWT_SECRET must be a secret of at least 32 characters (got (hidden))',
    ],
    [
      { BASE_URL: 'localhost:8080' },
      'Invalid configuration: BASE_URL must be an absolute http(s) URL (got "localhost:8080")',
    ],
  ])('stops with one line naming the variable for %j', (env, message) => {
    expect(() => loadConfig(env, noFiles)).toThrow(new ConfigError(message));
    expect(message).not.toContain('\n');
  });

  it('refuses more than one JWT key source', () => {
    expect(() =>
      loadConfig({ JWT_SECRET: 'x'.repeat(32), JWT_JWKS_URL: 'https://idp.example.com/jwks' }, noFiles),
    ).toThrow(/exclusive/);
  });
});
