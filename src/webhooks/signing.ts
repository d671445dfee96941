// Standard Webhooks 1.0 signatures (docs/webhooks.md): `v1,<base64 HMAC-SHA256>` of
// "<webhook-id>.<webhook-timestamp>.<body>", keyed with the base64-decoded secret after whsec_.
// Several signatures (during a secret rotation's overlap) are separated by spaces.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

const PREFIX = 'whsec_';

/** Keys by secret, made once (a subscription's deliveries all sign with the same one). */
const keys = new Map<string, KeyObject>();
function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (key === undefined) {
    key = createSecretKey(Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64'));
    if (keys.size >= 1000) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

/** One `v1,…` signature. */
export function signature(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', keyOf(secret))
    .update(`${id}.${String(timestamp)}.${body}`)
    .digest('base64')}`;
}

/** The `webhook-signature` header: one signature per secret that signs now. */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((s) => signature(s, id, timestamp, body)).join(' ');
}
