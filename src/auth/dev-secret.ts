// Outside production, with no key configured, the keys the service needs are generated once and
// kept in DATA_DIR, so that tokens stay valid and stored secrets stay readable across restarts,
// and nobody commits a secret: the JWT secret (HS256) and ENCRYPTION_KEY (crypto/encryption.ts).
// Production refuses to start without them (config/config.ts).
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ConfigError, type Config } from '../config/config.js';

export const DEV_SECRET_FILE = 'jwt-secret';
export const DEV_ENCRYPTION_KEY_FILE = 'encryption-key';

/** The file's first line, or `make()` written there first (0600) when there is none. */
async function readOrCreate(file: string, make: () => string, create: boolean): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (!create)
    throw new ConfigError(
      `No development secret in ${resolve(file, '..')}: no server has used this DATA_DIR yet (start it with the same DATA_DIR first)`,
    );
  await mkdir(resolve(file, '..'), { recursive: true });
  let value = make();
  await writeFile(file, `${value}\n`, { mode: 0o600, flag: 'wx' }).catch(async (e: unknown) => {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    value = (await readFile(file, 'utf8')).trim(); // another process wrote it first
  });
  return value;
}

/**
 * The config with development keys filled in where it needs them; as it was otherwise.
 * `generated` names the JWT secret's file when tokens are signed with it (the start-up hint).
 * With `create: false` (a script signing tokens) the JWT secret is read, and refused
 * (ConfigError) rather than made when it is not there: it would not be the one a server uses.
 */
export async function withDevelopmentSecret(
  config: Config,
  { create = true }: { create?: boolean } = {},
): Promise<{ config: Config; generated?: string }> {
  if (config.env === 'production') return { config };
  const dir = resolve(config.dataDir);
  let result = config;
  if (config.encryption.key === undefined && create) {
    const key = await readOrCreate(join(dir, DEV_ENCRYPTION_KEY_FILE), () => randomBytes(32).toString('base64'), true);
    result = { ...result, encryption: Object.freeze({ ...config.encryption, key }) };
  }
  const { secret, publicKey, jwksUrl } = config.jwt;
  if (secret !== undefined || publicKey !== undefined || jwksUrl !== undefined) {
    return { config: result === config ? config : Object.freeze(result) };
  }
  const file = join(dir, DEV_SECRET_FILE);
  const value = await readOrCreate(file, () => randomBytes(48).toString('base64url'), create);
  return {
    config: Object.freeze({ ...result, jwt: Object.freeze({ ...config.jwt, secret: value }) }),
    generated: file,
  };
}

/**
 * The command that prints the development token for this server, word for word: with
 * DATA_DIR when the server was given one in its environment, which `npm run token` in another
 * shell would not see (a DATA_DIR from config/*.json it reads as the server does).
 */
export function tokenCommand(env: Record<string, string | undefined>): string {
  const dir = env.DATA_DIR?.trim();
  if (dir === undefined || dir === '') return 'TOKEN=$(npm run -s token)';
  const path = resolve(dir); // npm runs the script in the project's directory, not this one
  const quoted = /^[\w./-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`;
  return `TOKEN=$(DATA_DIR=${quoted} npm run -s token)`;
}
