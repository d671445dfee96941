// Standard Webhooks 1.0 signatures (DESIGN §12): `v1,<base64 HMAC-SHA256>` of
// "<webhook-id>.<webhook-timestamp>.<body>", keyed with the base64-decoded secret after whsec_.
// Several signatures (during a secret rotation's overlap) are separated by spaces.
import { createHmac } from 'node:crypto';

const PREFIX = 'whsec_';

/** One `v1,…` signature. */
export function signature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key)
    .update(`${id}.${String(timestamp)}.${body}`)
    .digest('base64')}`;
}

/** The `webhook-signature` header: one signature per secret that signs now. */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((s) => signature(s, id, timestamp, body)).join(' ');
}
