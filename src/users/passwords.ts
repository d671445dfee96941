// Password hashing with argon2id at OWASP's parameters (19 MiB, 2 passes, 1 lane). The native
// binding runs on libuv's thread pool, off the event loop.
import { hash, verify } from '@node-rs/argon2';

// Argon2id is the library's default algorithm (its Algorithm is a const enum, which isolated
// modules cannot read); users.v1.test.ts checks every stored hash is $argon2id$.
const OPTIONS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

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
