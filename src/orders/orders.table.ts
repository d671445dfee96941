import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';
import type { Numeric } from '../db/columns.js';
import type { OrderStatus } from './order-status.js';

export interface OrdersTable {
  id: Generated<number>;
  customer_id: number;
  status: OrderStatus;
  total: Numeric;
  item_count: number;
  note: string | null;
  shipping_street: string | null;
  shipping_postal_code: string | null;
  cancellation_reason: string | null;
  /** Incremented by every change, actions included; the ETag (docs/api-guide.md#safe-retries). */
  version: Generated<number>;
  created_at: ColumnType<Date, never, never>;
  updated_at: ColumnType<Date, never, Date>;
}

export interface OrderItemsTable {
  order_id: number;
  line_no: number;
  product_id: number;
  product_name: string;
  quantity: number;
  unit_price: Numeric;
}

export type OrderRow = Selectable<OrdersTable>;
export type NewOrderRow = Insertable<OrdersTable>;
export type OrderItemRow = Selectable<OrderItemsTable>;
