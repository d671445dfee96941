// SQL for products. Driver errors become domain errors here.
import { versionMatches } from '../db/versions.js';
import type { IfMatch } from '../preconditions.js';
import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { isUniqueViolation } from '../db/pg-errors.js';
import { prepare } from '../db/prepared.js';
import { anyOf, prepareById } from '../db/prepared-by-id.js';
import { Conflict } from '../errors.js';
import type { NewProductRow, ProductRow } from './products.table.js';

function translate(error: unknown): never {
  if (isUniqueViolation(error, 'products_sku_key'))
    throw new Conflict('A product with this SKU already exists.', 'sku');
  throw error;
}

const selectProductById = prepareById(
  prepare(1, (db, id: number) => db.selectFrom('products').selectAll().where('id', '=', id), {
    warmUp: [0],
    repeatable: true,
  }),
  prepare(1, (db, ids: string) => db.selectFrom('products').selectAll().where('id', '=', anyOf(ids)), {
    warmUp: ['0'],
    repeatable: true,
  }),
);

/** `gone`: true once the read's client has hung up; a read still waiting for its statement is then not sent. */
export async function findProductById(db: Db, id: number, gone?: () => boolean): Promise<ProductRow | undefined> {
  return (await selectProductById(db, id, gone))[0];
}

export function insertProduct(db: Db, row: NewProductRow): Promise<ProductRow> {
  return db.insertInto('products').values(row).returningAll().executeTakeFirstOrThrow().catch(translate);
}

/**
 * Replaces the product's fields and increments its version, only if its version is one of
 * `versions` ('*' or undefined: any). Undefined when no row matched.
 */
export function updateProduct(
  db: Db,
  id: number,
  changes: Omit<NewProductRow, 'version'>,
  versions?: IfMatch,
): Promise<ProductRow | undefined> {
  const query = db
    .updateTable('products')
    .set({ ...changes, version: sql<number>`version + 1`, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where(versionMatches(versions));
  return query.returningAll().executeTakeFirst().catch(translate);
}

/** Deletes the product if it exists and (with If-Match) is at a version it names; true if it did. */
export async function deleteProductById(db: Db, id: number, ifMatch?: IfMatch): Promise<boolean> {
  const deleted = await db
    .deleteFrom('products')
    .where('id', '=', id)
    .where(versionMatches(ifMatch))
    .executeTakeFirst();
  return deleted.numDeletedRows > 0n;
}

/** A page and the total, sent together (pipelined on PostgreSQL). */
export async function listProducts(
  db: Db,
  offset: number,
  limit: number,
): Promise<{ rows: ProductRow[]; total: number }> {
  const [rows, { count }] = await Promise.all([
    db.selectFrom('products').selectAll().orderBy('id').limit(limit).offset(offset).execute(),
    db
      .selectFrom('products')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, total: count };
}
