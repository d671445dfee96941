// SQL for webhook subscriptions.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { NewWebhookSubscriptionRow, WebhookSubscriptionRow } from './webhooks.table.js';

/**
 * Inserts a subscription whose secret is sealed for its own id (`seal`, crypto/encryption.ts:
 * the ciphertext is bound to the row): the id is drawn from the table's sequence first.
 */
export async function insertSubscription(
  db: Db,
  row: Pick<NewWebhookSubscriptionRow, 'url' | 'events' | 'description'>,
  seal: (id: number) => string,
): Promise<WebhookSubscriptionRow> {
  const { rows: drawn } = await sql<{ id: number }>`
    select nextval(pg_get_serial_sequence('webhook_subscriptions', 'id')) as id`.execute(db);
  const id = Number(drawn[0]?.id);
  const { rows } = await sql<WebhookSubscriptionRow>`
    insert into webhook_subscriptions (id, url, events, description, secret) overriding system value
    values (${id}, ${row.url}, ${row.events}, ${row.description ?? null}, ${seal(id)})
    returning *`.execute(db);
  const [inserted] = rows;
  if (inserted === undefined) throw new Error('the subscription was not inserted');
  return inserted;
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
