// SQL for webhook subscriptions.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { NewWebhookSubscriptionRow, WebhookSubscriptionRow } from './webhooks.table.js';

export function insertSubscription(db: Db, row: NewWebhookSubscriptionRow): Promise<WebhookSubscriptionRow> {
  return db.insertInto('webhook_subscriptions').values(row).returningAll().executeTakeFirstOrThrow();
}

export function findSubscription(db: Db, id: number): Promise<WebhookSubscriptionRow | undefined> {
  return db.selectFrom('webhook_subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
}

/** A page, newest first, and the total (a short list: counted). */
export async function listSubscriptions(
  db: Db,
  limit: number,
  offset: number,
): Promise<{ rows: WebhookSubscriptionRow[]; total: number }> {
  const [rows, counted] = await Promise.all([
    db.selectFrom('webhook_subscriptions').selectAll().orderBy('id', 'desc').limit(limit).offset(offset).execute(),
    db
      .selectFrom('webhook_subscriptions')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirst(),
  ]);
  return { rows, total: counted?.count ?? 0 };
}

export type SubscriptionChanges = Partial<
  Pick<
    WebhookSubscriptionRow,
    'url' | 'events' | 'description' | 'enabled' | 'secret' | 'previous_secret' | 'previous_secret_expires_at'
  >
>;

export function updateSubscription(
  db: Db,
  id: number,
  changes: SubscriptionChanges,
): Promise<WebhookSubscriptionRow | undefined> {
  return db
    .updateTable('webhook_subscriptions')
    .set({ ...changes, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteSubscription(db: Db, id: number): Promise<void> {
  await db.deleteFrom('webhook_subscriptions').where('id', '=', id).execute();
}

/** The new secret in, the current one kept as the previous one until `previousUntil`: one statement. */
export function rotateSubscriptionSecret(
  db: Db,
  id: number,
  secret: string,
  previousUntil: Date,
): Promise<WebhookSubscriptionRow | undefined> {
  return db
    .updateTable('webhook_subscriptions')
    .set({
      previous_secret: sql<string>`secret`,
      previous_secret_expires_at: previousUntil,
      secret,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}
