// SQL for stock. Reservations are single conditional UPDATEs: the row lock and the
// `available >= quantity` check make overselling impossible under any concurrency.
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { prepare } from '../db/prepared.js';
import { anyOf, prepareById } from '../db/prepared-by-id.js';
import type { StockRow } from './products.table.js';

export async function insertStock(db: Db, productId: number): Promise<void> {
  await db.insertInto('stock').values({ product_id: productId }).execute();
}

// Gathered like the primary-key reads (db/prepared.ts, prepareById): a product's stock is read
// by its product's id, the table's key.
const selectStock = prepareById(
  prepare(1, (db, productId: number) => db.selectFrom('stock').selectAll().where('product_id', '=', productId), {
    warmUp: [0],
    repeatable: true,
  }),
  prepare(
    1,
    (db, productIds: string) => db.selectFrom('stock').selectAll().where('product_id', '=', anyOf(productIds)),
    {
      warmUp: ['0'],
      repeatable: true,
    },
  ),
  (row) => row.product_id,
);

/** `gone`: true once the read's client has hung up; a read still waiting for its statement is then not sent. */
export async function findStock(db: Db, productId: number, gone?: () => boolean): Promise<StockRow | undefined> {
  return (await selectStock(db, productId, gone))[0];
}

export function setAvailable(db: Db, productId: number, available: number): Promise<StockRow | undefined> {
  return db
    .updateTable('stock')
    .set({ available, updated_at: sql<Date>`now()` })
    .where('product_id', '=', productId)
    .returningAll()
    .executeTakeFirst();
}

/** A quantity of one product: an order line, as far as stock is concerned. */
export interface StockLine {
  productId: number;
  quantity: number;
}

/**
 * Moves the lines' units in one statement: 'release' gives them back to available (cancelling
 * or deleting an unshipped order), 'consume' takes them out of reserved (shipping). Each
 * product appears once in `lines` (an order has one line per product), so no row is updated
 * twice.
 */
export async function moveStock(db: Db, lines: readonly StockLine[], effect: 'release' | 'consume'): Promise<void> {
  if (lines.length === 0) return;
  const available = effect === 'release' ? sql<number>`s.available + l.quantity` : sql<number>`s.available`;
  const values = sql.join(lines.map((l) => sql`(${l.productId}::bigint, ${l.quantity}::integer)`));
  await sql`
    update stock s set available = ${available}, reserved = greatest(s.reserved - l.quantity, 0), updated_at = now()
    from (values ${values}) as l (product_id, quantity)
    where s.product_id = l.product_id`.execute(db);
}
