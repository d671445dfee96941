// Stock levels (docs/api-guide.md#products-and-stock): available can be ordered, reserved is held by unshipped orders.
import type { Db } from '../db/database.js';
import { EntityNotFound } from '../errors.js';
import type { Stock } from './products.schemas.js';
import type { StockRow } from './products.table.js';
import * as repo from './stock.repository.js';

export function toStock(row: StockRow): Stock {
  return {
    productId: row.product_id,
    available: row.available,
    reserved: row.reserved,
    updatedAt: row.updated_at.toISOString(),
  };
}

/** `gone`: true once the request's client has hung up (a read still waiting is not sent). */
export async function getStock(db: Db, productId: number, gone?: () => boolean): Promise<Stock> {
  const row = await repo.findStock(db, productId, gone);
  if (row === undefined) throw new EntityNotFound('Product', productId);
  return toStock(row);
}

export async function setStock(db: Db, productId: number, available: number): Promise<Stock> {
  const row = await repo.setAvailable(db, productId, available);
  if (row === undefined) throw new EntityNotFound('Product', productId);
  return toStock(row);
}
