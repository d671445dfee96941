// Password hashing with argon2id at OWASP's parameters (19 MiB, 2 passes, 1 lane). The native
// binding runs on libuv's thread pool, off the event loop.
import { hash, verify, type Algorithm } from '@node-rs/argon2';

// Algorithm is a const enum, which isolated modules cannot read; 2 is Argon2id.
const ARGON2ID = 2 as Algorithm;
const OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}
