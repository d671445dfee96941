// The pieces of loading the configuration that are not the mapping itself: the one-line error,
// and the parsers of the variables whose form the schema cannot say alone.
import type { TSchema } from 'typebox';
import ipaddr from 'ipaddr.js';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

export function fail(name: string, schema: TSchema | undefined, value: unknown): never {
  const rule =
    schema !== undefined && 'description' in schema && typeof schema.description === 'string'
      ? schema.description
      : 'a valid value';
  const shown =
    (name.startsWith('JWT_') && name !== 'JWT_ISSUER' && name !== 'JWT_AUDIENCE') ||
    name.startsWith('ENCRYPTION_KEY') ||
    name === 'REDIS_URL' ||
    name === 'SMTP_URL' ||
    name === 'DATABASE_DIRECT_URL' ||
    name === 'DATABASE_REPLICA_URLS'
      ? '(hidden)'
      : JSON.stringify(value);
  throw new ConfigError(`Invalid configuration: ${name} must be ${rule} (got ${shown})`);
}

export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** "5s,5m,2h" → [5000, 300000, 7200000] (the schema has checked the form). */
export function parseDurations(list: string): number[] {
  return list.split(',').map((d) => {
    const [, n = '0', unit = 'ms'] = /^(\d+)(ms|s|m|h)$/.exec(d) ?? [];
    return Number(n) * (DURATION_MS[unit] ?? 1);
  });
}

/** TRUST_PROXY → false, a hop count, or the proxies' addresses (each checked as an IP or CIDR). */
export function parseTrustProxy(value: string): false | number | string[] {
  if (value === 'false') return false;
  if (value === 'true') return 1;
  if (/^\d+$/.test(value)) return Number(value) === 0 ? false : Number(value);
  const entries = value.split(',').map((v) => v.trim());
  for (const entry of entries) {
    const valid = entry.includes('/') ? ipaddr.isValidCIDR(entry) : ipaddr.isValid(entry);
    if (!valid)
      throw new ConfigError(
        `Invalid configuration: TRUST_PROXY entry "${entry}" must be an IP address or a CIDR such as 10.0.0.0/8`,
      );
  }
  return entries;
}
