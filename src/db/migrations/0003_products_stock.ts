import { sql, type Kysely } from 'kysely';

// docs/api-guide.md#products-and-stock. Prices are exact numeric(12,2); version starts at 1 and is the ETag. Each product
// has one stock row whose counts can never go negative, whatever the code does.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table products (
      id          bigint generated always as identity primary key,
      sku         text not null constraint products_sku_check check (char_length(sku) between 1 and 64),
      name        text not null constraint products_name_check check (char_length(name) between 2 and 200),
      description text constraint products_description_check check (char_length(description) <= 2000),
      price       numeric(12, 2) not null constraint products_price_check check (price >= 0),
      version     integer not null default 1 constraint products_version_check check (version >= 1),
      created_at  timestamptz not null default now(),
      updated_at  timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index products_sku_key on products (sku)`.execute(db);
  await sql`
    create table stock (
      product_id bigint primary key references products (id) on delete cascade,
      available  integer not null default 0 constraint stock_available_check check (available >= 0),
      reserved   integer not null default 0 constraint stock_reserved_check check (reserved >= 0),
      updated_at timestamptz not null default now()
    )`.execute(db);
}
