// Webhook subscriptions (docs/webhooks.md): administrators only; URLs checked against SSRF; the
// secret made here and shown once (and again at each rotation).
import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { subscriptionBinding, type Encryption } from '../crypto/encryption.js';
import type { Db } from '../db/database.js';
import { EntityNotFound, Forbidden, InvalidField } from '../errors.js';
import { pageWindow, type PageOf } from '../page.js';
import { urlRefusal, type UrlPolicy } from './address-guard.js';
import * as deliveries from './deliveries.repository.js';
import * as repo from './webhooks.repository.js';
import type { WebhookSubscriptionRow } from './webhooks.table.js';
import type { CreateWebhookSubscription, EventPattern, PatchWebhookSubscription } from './webhooks.schemas.js';

export interface WebhookSubscription {
  id: number;
  url: string;
  events: EventPattern[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
}

export type WithSecret = WebhookSubscription & { secret: string };

export interface Policy extends UrlPolicy {
  /** How long a rotated secret still signs (WEBHOOK_SECRET_OVERLAP_HOURS). */
  secretOverlapHours: number;
  /** Secrets are stored encrypted (ENCRYPTION_KEY): a dump or a backup reveals none. */
  encryption: Encryption;
}

function toSubscription(row: WebhookSubscriptionRow): WebhookSubscription {
  return {
    id: row.id,
    url: row.url,
    events: row.events as EventPattern[],
    description: row.description,
    enabled: row.enabled,
    createdAt: row.created_at.toISOString(),
  };
}

/** `whsec_` + base64 of 32 random bytes (Standard Webhooks). */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Subscriptions are an administrator's (the routes refuse others first, config.admin). */
export const ADMIN_ONLY = 'Webhook subscriptions need the admin scope.';

function assertAdmin(caller: Principal): void {
  if (!caller.admin) throw new Forbidden(ADMIN_ONLY, 'admin');
}

async function assertUrl(url: string, policy: UrlPolicy): Promise<void> {
  const refusal = await urlRefusal(url, policy);
  if (refusal !== undefined) throw new InvalidField('url', refusal);
}

export async function createSubscription(
  db: Db,
  caller: Principal,
  input: CreateWebhookSubscription,
  policy: Policy,
): Promise<WithSecret> {
  assertAdmin(caller);
  await assertUrl(input.url, policy);
  const secret = newSecret();
  const row = await repo.insertSubscription(
    db,
    { url: input.url, events: [...new Set(input.events)], description: input.description ?? null },
    (id) => policy.encryption.encrypt(secret, 'webhook-secret', subscriptionBinding(id)),
  );
  return { ...toSubscription(row), secret };
}

export async function listSubscriptions(
  db: Db,
  caller: Principal,
  q: { page: number; size: number },
): Promise<PageOf<WebhookSubscription>> {
  assertAdmin(caller);
  const { size, offset } = pageWindow(q.page, q.size);
  const { rows, total } = await repo.listSubscriptions(db, size, offset);
  return { content: rows.map(toSubscription), total, page: q.page, size };
}

export async function getSubscription(db: Db, caller: Principal, id: number): Promise<WebhookSubscription> {
  assertAdmin(caller);
  const row = await repo.findSubscription(db, id);
  if (row === undefined) throw new EntityNotFound('Webhook subscription', id);
  return toSubscription(row);
}

export async function updateSubscription(
  db: Db,
  caller: Principal,
  id: number,
  input: PatchWebhookSubscription,
  policy: Policy,
): Promise<WebhookSubscription> {
  assertAdmin(caller);
  if (input.url !== undefined) await assertUrl(input.url, policy);
  const changes: repo.SubscriptionChanges = {};
  if (input.url !== undefined) changes.url = input.url;
  if (input.events !== undefined) changes.events = [...new Set(input.events)];
  if (input.description !== undefined) changes.description = input.description;
  if (input.enabled !== undefined) changes.enabled = input.enabled;
  const row =
    Object.keys(changes).length === 0
      ? await repo.findSubscription(db, id)
      : await repo.updateSubscription(db, id, changes);
  if (row === undefined) throw new EntityNotFound('Webhook subscription', id);
  return toSubscription(row);
}

/** Idempotent (DELETE): a missing one is a no-op. */
export async function deleteSubscription(db: Db, caller: Principal, id: number): Promise<void> {
  assertAdmin(caller);
  await repo.deleteSubscription(db, id);
}

/**
 * A new secret; the old one keeps signing beside it for the overlap, so that a receiver can
 * switch without losing a delivery.
 */
export async function rotateSecret(db: Db, caller: Principal, id: number, policy: Policy): Promise<WithSecret> {
  assertAdmin(caller);
  const secret = newSecret();
  const row = await repo.rotateSubscriptionSecret(
    db,
    id,
    policy.encryption.encrypt(secret, 'webhook-secret', subscriptionBinding(id)),
    new Date(Date.now() + policy.secretOverlapHours * 3_600_000),
  );
  if (row === undefined) throw new EntityNotFound('Webhook subscription', id);
  return { ...toSubscription(row), secret };
}

export interface Delivery {
  id: number;
  eventId: string;
  eventType: string;
  status: 'pending' | 'delivered' | 'failed' | 'dead';
  attempts: number;
  lastAttemptAt: string | null;
  lastResponseStatus: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
}

/** The delivery log of one subscription, newest first (docs/webhooks.md). */
export async function listDeliveries(
  db: Db,
  caller: Principal,
  id: number,
  q: { page: number; size: number; status?: Delivery['status'] | undefined },
): Promise<PageOf<Delivery>> {
  assertAdmin(caller);
  if ((await repo.findSubscription(db, id)) === undefined) throw new EntityNotFound('Webhook subscription', id);
  const { size, offset } = pageWindow(q.page, q.size);
  const { rows, total } = await deliveries.listDeliveries(db, id, q.status, size, offset);
  return {
    content: rows.map((r) => ({
      id: r.id,
      eventId: r.event_id,
      eventType: r.event_type,
      status: r.status,
      attempts: r.attempts,
      lastAttemptAt: r.last_attempt_at?.toISOString() ?? null,
      lastResponseStatus: r.last_response_status,
      lastError: r.last_error,
      // Only a delivery still to be tried has a next attempt.
      nextAttemptAt: r.status === 'pending' || r.status === 'failed' ? r.next_attempt_at.toISOString() : null,
    })),
    total,
    page: q.page,
    size,
  };
}

/** Sends a delivery again (same webhook-id), with the whole retry schedule. */
export async function redeliver(db: Db, caller: Principal, id: number, deliveryId: number): Promise<void> {
  assertAdmin(caller);
  if (!(await deliveries.requeueDelivery(db, id, deliveryId))) {
    throw new EntityNotFound('Webhook delivery', deliveryId);
  }
}
