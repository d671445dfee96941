// Secrets at rest (docs/webhooks.md "Secrets at rest", docs/configuration.md ENCRYPTION_KEY).
// Webhook secrets and the answers stored under an Idempotency-Key are kept in the database
// encrypted with AES-256-GCM under ENCRYPTION_KEY; a dump or a backup reveals none of them.
//
// A stored value is `enc2.<key id>.<base64url of iv ‖ ciphertext ‖ tag>`: the key id (8
// characters derived from the key) says which key decrypts it, so that during a rotation
// (ENCRYPTION_KEY new, ENCRYPTION_KEY_PREVIOUS the old one) both decrypt and the values under the
// old key are re-encrypted in the background (reencrypt.ts). The additional data names what the
// value is (`purpose`) and the row it belongs to (`binding`: the subscription's id; the
// Idempotency-Key's subject and key): a ciphertext copied to another column, or to another row,
// does not decrypt there. Values of the earlier form, `enc1`, bound to their purpose only, are
// still read, and the background pass rewrites them in the current form.
//
// Idempotency fingerprints are HMAC-SHA256 under a key derived from ENCRYPTION_KEY (HKDF), not
// plain hashes: the bodies they fingerprint hold passwords, which a plain SHA-256 would let a
// database reader guess at hash speed.
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';

const PREFIX = 'enc2';
/** The earlier form: its additional data is the purpose alone. */
const LEGACY_PREFIX = 'enc1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export type Purpose = 'webhook-secret' | 'idempotency-answer';

/** The row a webhook subscription's secret (and previous secret) belongs to. */
export function subscriptionBinding(id: number): string {
  return `webhook subscription ${id}`;
}

/** The row a stored Idempotency-Key answer belongs to: its subject and key. */
export function answerBinding(subject: string, key: string): string {
  return `idempotency key ${JSON.stringify([subject, key])}`;
}

function additionalData(purpose: Purpose, binding: string): Buffer {
  return Buffer.from(`${purpose}\n${binding}`);
}

interface Key {
  id: string;
  secret: Buffer;
  fingerprintKey: Buffer;
}

function keyOf(secret: Buffer): Key {
  if (secret.length !== 32) throw new Error('An encryption key is 32 bytes');
  return {
    id: createHash('sha256').update('resource-api key id\n').update(secret).digest('base64url').slice(0, 8),
    secret,
    fingerprintKey: Buffer.from(hkdfSync('sha256', secret, '', 'resource-api idempotency fingerprint', 32)),
  };
}

/** A value that no configured key decrypts (or that was altered). */
export class UndecryptableError extends Error {
  constructor(reason: string) {
    super(`cannot decrypt a stored secret: ${reason} (ENCRYPTION_KEY, ENCRYPTION_KEY_PREVIOUS)`);
  }
}

export class Encryption {
  private readonly current: Key;
  private readonly keys: Map<string, Key>;

  constructor(current: Buffer, previous?: Buffer) {
    this.current = keyOf(current);
    this.keys = new Map([[this.current.id, this.current]]);
    if (previous !== undefined) {
      const old = keyOf(previous);
      if (!this.keys.has(old.id)) this.keys.set(old.id, old);
    }
  }

  /** The current key's id: values stored under another are re-encrypted (reencrypt.ts). */
  get currentKeyId(): string {
    return this.current.id;
  }

  /** How every value stored in the current form under the current key begins. */
  get currentPrefix(): string {
    return `${PREFIX}.${this.current.id}.`;
  }

  /** Whether a previous key is configured (a rotation under way). */
  get rotating(): boolean {
    return this.keys.size > 1;
  }

  /** Whether `stored` is in the current form under the current key (anything else is re-encrypted). */
  isCurrent(stored: string): boolean {
    return stored.startsWith(this.currentPrefix);
  }

  encrypt(plaintext: string, purpose: Purpose, binding: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.current.secret, iv);
    cipher.setAAD(additionalData(purpose, binding));
    const body = Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${PREFIX}.${this.current.id}.${body.toString('base64url')}`;
  }

  /**
   * The plaintext of a stored value. A value that is not in the encrypted form is returned as
   * it is: a row written before encryption was introduced, which the background pass encrypts.
   */
  decrypt(stored: string, purpose: Purpose, binding: string): string {
    const legacy = stored.startsWith(`${LEGACY_PREFIX}.`);
    if (!legacy && !stored.startsWith(`${PREFIX}.`)) return stored;
    const [, keyId, data] = stored.split('.');
    const key = keyId === undefined ? undefined : this.keys.get(keyId);
    if (key === undefined || data === undefined)
      throw new UndecryptableError(`no configured key has id ${String(keyId)}`);
    const body = Buffer.from(data, 'base64url');
    if (body.length < IV_BYTES + TAG_BYTES) throw new UndecryptableError('the value is cut short');
    const decipher = createDecipheriv('aes-256-gcm', key.secret, body.subarray(0, IV_BYTES));
    decipher.setAAD(legacy ? Buffer.from(purpose) : additionalData(purpose, binding));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      return Buffer.concat([
        decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)),
        decipher.final(),
      ]).toString('utf8');
    } catch {
      throw new UndecryptableError('the value does not authenticate under its key, for its row');
    }
  }

  /** An HMAC of the parts under the current key's fingerprint key: `h1.<key id>.<base64url>`. */
  fingerprint(parts: readonly string[]): string {
    return `h1.${this.current.id}.${this.hmac(this.current, parts)}`;
  }

  /**
   * Whether a stored fingerprint is the one of `parts`: made under the current key (`current`,
   * already computed), under the previous key during a rotation, or a plain SHA-256 of a key
   * stored before fingerprints were keyed (those expire with IDEMPOTENCY_TTL_HOURS).
   */
  fingerprintMatches(stored: string, current: string, parts: readonly string[]): boolean {
    if (stored === current) return true;
    if (stored.startsWith('h1.')) {
      const [, keyId] = stored.split('.');
      const key = keyId === undefined ? undefined : this.keys.get(keyId);
      return key !== undefined && key !== this.current && stored === `h1.${key.id}.${this.hmac(key, parts)}`;
    }
    const legacy = createHash('sha256');
    for (const part of parts) legacy.update(part);
    return stored === legacy.digest('base64url');
  }

  private hmac(key: Key, parts: readonly string[]): string {
    const mac = createHmac('sha256', key.fingerprintKey);
    for (const part of parts) mac.update(part);
    return mac.digest('base64url');
  }
}

/** A key from ENCRYPTION_KEY's form, base64 of 32 bytes; undefined when it is not that. */
export function parseEncryptionKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed, trimmed.includes('-') || trimmed.includes('_') ? 'base64url' : 'base64');
  return key.length === 32 ? key : undefined;
}
