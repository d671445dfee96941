// DESIGN §1: outside production, with no key configured, an HS256 secret is generated once and
// kept in DATA_DIR, so tokens stay valid across restarts and nobody commits a secret.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Config } from '../config.js';

export const DEV_SECRET_FILE = 'jwt-secret';

/** The config with a development secret filled in when it needs one; as it was otherwise. */
export async function withDevelopmentSecret(config: Config): Promise<{ config: Config; generated?: string }> {
  const { secret, publicKey, jwksUrl } = config.jwt;
  if (config.env === 'production' || secret !== undefined || publicKey !== undefined || jwksUrl !== undefined)
    return { config };
  const dir = resolve(config.dataDir);
  const file = join(dir, DEV_SECRET_FILE);
  let value: string;
  try {
    value = (await readFile(file, 'utf8')).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(dir, { recursive: true });
    value = randomBytes(48).toString('base64url');
    await writeFile(file, `${value}\n`, { mode: 0o600, flag: 'wx' }).catch(async (e: unknown) => {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      value = (await readFile(file, 'utf8')).trim(); // another process wrote it first
    });
  }
  return {
    config: Object.freeze({ ...config, jwt: Object.freeze({ ...config.jwt, secret: value }) }),
    generated: file,
  };
}
