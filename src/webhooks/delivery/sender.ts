// One delivery attempt: the POST of the event in the Standard Webhooks format over a keep-alive
// undici Agent (redirects are not followed), and what its answer means. The exchange is here;
// what to record for it is `outcomeOf`, a pure function of the answer and the schedule.
import { Agent } from 'undici';
import { toCloudEvent } from '../../events/index.js';
import { deliverySpan } from '../../tracing/delivery-spans.js';
import type { ResolveHost } from '../address-guard.js';
import type { ClaimedDelivery } from '../deliveries.repository.js';
import { signatureHeader } from '../signing.js';
import { guardedLookup, RefusedAddress, targetOf } from './network.js';

/**
 * How long a claim is held: an attempt's time-out and 5 s more, at most 30 s (WEBHOOK_TIMEOUT_MS
 * is at most 25 s). A killed instance's claims are due again after it.
 */
export const leaseMs = (timeoutMs: number): number => Math.min(30_000, timeoutMs + 5_000);

/** The wait before the attempt after `attempts` failed ones; undefined when the schedule is spent. */
export function retryDelayMs(schedule: readonly number[], attempts: number, random = Math.random): number | undefined {
  const step = schedule[attempts - 1];
  return step === undefined ? undefined : Math.round(step * (0.8 + 0.4 * random()));
}

/** How an exchange with a receiver ended: its status, or why there was none. */
export interface Exchange {
  responseStatus: number | null;
  error: string | null;
}

/** What to record for an attempt. */
export type Outcome =
  | { status: 'delivered'; responseStatus: number }
  | { status: 'failed'; responseStatus: number | null; error: string; retryInMs: number; disable: boolean }
  | { status: 'dead'; responseStatus: number | null; error: string; disable: boolean };

/**
 * A 2xx is delivered; anything else is retried after the next step of the schedule (±20%), then
 * dead once the schedule is spent; a 410 Gone also disables the subscription.
 */
export function outcomeOf(
  { responseStatus, error }: Exchange,
  attempts: number,
  schedule: readonly number[],
  random = Math.random,
): Outcome {
  if (responseStatus !== null && responseStatus >= 200 && responseStatus < 300)
    return { status: 'delivered', responseStatus };
  const why = error ?? `the receiver answered ${String(responseStatus)}`;
  const disable = responseStatus === 410;
  const delay = retryDelayMs(schedule, attempts, random);
  return delay === undefined
    ? { status: 'dead', responseStatus, error: why, disable }
    : { status: 'failed', responseStatus, error: why, retryInMs: delay, disable };
}

export interface SenderOptions {
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  resolveHost: ResolveHost;
  /** The CloudEvents `source`: `<BASE_URL>/api/v1`. */
  source: string;
  /** The plain text of a stored (encrypted) secret of the subscription `subscriptionId`. */
  decrypt: (stored: string, subscriptionId: number) => string;
}

export class Sender {
  readonly #agent: Agent;
  readonly #options: SenderOptions;
  readonly #secrets = new Map<string, string>();

  constructor(options: SenderOptions) {
    this.#options = options;
    this.#agent = new Agent({
      connect: { timeout: options.timeoutMs, lookup: guardedLookup(options.resolveHost, options.allowPrivateNetworks) },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  /**
   * Sends `d` once. `answered` is called as soon as the exchange is over, before the caller
   * records anything: the subscription's slot is free from then.
   */
  async exchange(d: ClaimedDelivery, answered: () => void): Promise<Exchange> {
    const { timeoutMs, allowPrivateNetworks, source } = this.#options;
    const body = toCloudEvent(
      { id: d.event_id, type: d.event_type, subject: d.subject, time: d.time, data: d.data },
      source,
    );
    const timestamp = Math.floor(Date.now() / 1000);
    let responseStatus: number | null = null;
    let error: string | null = null;
    let timer: NodeJS.Timeout | undefined;
    // A CLIENT span in the trace of the request that wrote the event, its traceparent sent on.
    const span = deliverySpan(d);
    try {
      const secrets =
        d.previous_secret !== null &&
        d.previous_secret_expires_at !== null &&
        d.previous_secret_expires_at.getTime() > Date.now()
          ? [this.#plain(d.secret, d.subscription_id), this.#plain(d.previous_secret, d.subscription_id)]
          : [this.#plain(d.secret, d.subscription_id)];
      const target = targetOf(d.url);
      if (!allowPrivateNetworks && target.privateLiteral !== undefined) {
        throw new RefusedAddress(`refused to connect: ${target.privateLiteral} is not a public address`);
      }
      // The attempt's whole time, connection to last byte (undici's own time-outs bound each
      // phase, not the whole). A controller and a plain timer: AbortSignal.timeout was among the
      // larger costs of a delivery in the server's profile.
      const controller = new AbortController();
      timer = setTimeout(() => {
        controller.abort(new Error(`timeout: no complete answer within ${String(timeoutMs)} ms`));
      }, timeoutMs);
      const response = await this.#agent.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/cloudevents+json',
          'user-agent': 'resource-api-webhooks',
          'webhook-id': d.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, d.event_id, timestamp, body),
          ...span?.headers,
        },
        signal: controller.signal,
      });
      responseStatus = response.statusCode;
      await response.body.dump();
    } catch (e) {
      error = e instanceof Error ? e.message.slice(0, 500) : 'delivery failed';
    } finally {
      clearTimeout(timer);
      answered();
      span?.end(responseStatus, error);
    }
    return { responseStatus, error };
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  /** Secrets are stored encrypted (crypto/encryption.ts); each stored value is decrypted once. */
  #plain(stored: string, subscriptionId: number): string {
    const cached = `${subscriptionId} ${stored}`;
    let plain = this.#secrets.get(cached);
    if (plain === undefined) {
      plain = this.#options.decrypt(stored, subscriptionId);
      if (this.#secrets.size >= 1000) this.#secrets.clear();
      this.#secrets.set(cached, plain);
    }
    return plain;
  }
}
