// Products (docs/api-guide.md#products-and-stock). version is the optimistic-concurrency token and the ETag.
import type { IfMatch } from '../preconditions.js';
import type { Db } from '../db/database.js';
import { pageWindow, type PageOf } from '../page.js';
import { EntityNotFound, PreconditionFailed } from '../errors.js';
import { fromJsonNumber, toJsonNumber } from '../money.js';
import * as repo from './products.repository.js';
import type { Product, ProductRequest } from './products.schemas.js';
import type { ProductRow } from './products.table.js';
import { insertStock } from './stock.repository.js';
import { transact } from '../db/transact.js';

export function toProduct(row: ProductRow): Product {
  return {
    id: row.id,
    sku: row.sku,
    name: row.name,
    description: row.description,
    price: toJsonNumber(row.price),
    version: row.version,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** `gone`: true once the request's client has hung up (a read still waiting is not sent). */
export async function getProduct(db: Db, id: number, gone?: () => boolean): Promise<Product> {
  const row = await repo.findProductById(db, id, gone);
  if (row === undefined) throw new EntityNotFound('Product', id);
  return toProduct(row);
}

export async function listProducts(db: Db, q: { page: number; size: number }): Promise<PageOf<Product>> {
  const { size, offset } = pageWindow(q.page, q.size);
  const { rows, total } = await repo.listProducts(db, offset, size);
  return { content: rows.map(toProduct), total, page: q.page, size };
}

function columns(input: ProductRequest) {
  return {
    sku: input.sku,
    name: input.name,
    description: input.description ?? null,
    price: fromJsonNumber(input.price),
  };
}

/** A new product starts at version 1 with stock 0 available, 0 reserved. */
export async function createProduct(db: Db, input: ProductRequest): Promise<Product> {
  return transact(db, async (trx) => {
    const row = await repo.insertProduct(trx, columns(input));
    await insertStock(trx, row.id);
    return toProduct(row);
  });
}

/**
 * Replaces the product. With If-Match versions, only when the current version is one of
 * them (412 otherwise); the check and the write are one statement, so no change is lost.
 */
export async function replaceProduct(db: Db, id: number, input: ProductRequest, ifMatch?: IfMatch): Promise<Product> {
  const row = await repo.updateProduct(db, id, columns(input), ifMatch);
  if (row !== undefined) return toProduct(row);
  const current = await repo.findProductById(db, id);
  if (current === undefined) throw new EntityNotFound('Product', id);
  throw new PreconditionFailed('Product', id, current.version);
}

/**
 * Deletes the product; idempotent (gone already: nothing happens). With If-Match versions, only
 * when the current version is one of them (412 otherwise); the check and the delete are one
 * statement.
 */
export async function deleteProduct(db: Db, id: number, ifMatch?: IfMatch): Promise<void> {
  if (await repo.deleteProductById(db, id, ifMatch)) return;
  // Not deleted: already gone (204 all the same), or at a version If-Match does not name.
  const current = ifMatch === undefined ? undefined : await repo.findProductById(db, id);
  if (current !== undefined) throw new PreconditionFailed('Product', id, current.version);
}
