import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';
import type { Numeric } from '../db/columns.js';

export interface ProductsTable {
  id: Generated<number>;
  sku: string;
  name: string;
  description: string | null;
  price: Numeric;
  version: Generated<number>;
  created_at: ColumnType<Date, never, never>;
  updated_at: ColumnType<Date, never, Date>;
}

export interface StockTable {
  product_id: number;
  available: Generated<number>;
  reserved: Generated<number>;
  updated_at: ColumnType<Date, never, Date>;
}

export type ProductRow = Selectable<ProductsTable>;
export type NewProductRow = Insertable<ProductsTable>;
export type StockRow = Selectable<StockTable>;
