import { sql, type Kysely } from 'kysely';

// docs/api-guide.md#orders. customer_id has no foreign key on purpose: deleting a user keeps its orders
// (docs/api-guide.md#users). Items keep the product's name and price at the time of ordering.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table orders (
      id                   bigint generated always as identity primary key,
      customer_id          bigint not null,
      status               text not null constraint orders_status_check check (status in ('PENDING', 'CONFIRMED', 'SHIPPED', 'DELIVERED', 'CANCELLED')),
      total                numeric(14, 2) not null constraint orders_total_check check (total >= 0),
      item_count           integer not null constraint orders_item_count_check check (item_count >= 1),
      note                 text constraint orders_note_check check (char_length(note) <= 500),
      shipping_street      text,
      shipping_postal_code text constraint orders_postal_code_check check (shipping_postal_code ~ '^[0-9]{5}$'),
      cancellation_reason  text,
      created_at           timestamptz not null default now(),
      updated_at           timestamptz not null default now(),
      constraint orders_shipping_address_check check ((shipping_street is null) = (shipping_postal_code is null))
    )`.execute(db);
  await sql`
    create table order_items (
      order_id     bigint not null references orders (id) on delete cascade,
      line_no      integer not null,
      product_id   bigint not null,
      product_name text not null,
      quantity     integer not null constraint order_items_quantity_check check (quantity > 0),
      unit_price   numeric(12, 2) not null constraint order_items_unit_price_check check (unit_price >= 0),
      primary key (order_id, line_no)
    )`.execute(db);
  // The list's filters (customer, status) and sorts (createdAt, id, total, status), each
  // ending in id, the tie-breaker.
  await sql`create index orders_created_at_id_idx on orders (created_at, id)`.execute(db);
  await sql`create index orders_total_id_idx on orders (total, id)`.execute(db);
  await sql`create index orders_status_id_idx on orders (status, id)`.execute(db);
  await sql`create index orders_status_created_at_id_idx on orders (status, created_at, id)`.execute(db);
  await sql`create index orders_customer_created_at_id_idx on orders (customer_id, created_at, id)`.execute(db);
  await sql`create index orders_customer_status_created_at_id_idx on orders (customer_id, status, created_at, id)`.execute(
    db,
  );
}
