import { sql, type Kysely } from 'kysely';

// Lists at millions of rows (docs/lists.md).
//
// 1. Exact totals without counting: row_counts holds the number of users, of orders, and of
//    orders per status, kept by triggers in the same transaction as every insert, delete and
//    status change. Each count is spread over 16 shard rows and a writer adds its delta to a
//    random one, so concurrent writers rarely wait on one row lock; a read sums 16 rows.
//    Insert and delete triggers are per statement (one counter write per statement, however
//    many rows: a bulk load stays fast); the status trigger is per row and fires only when the
//    status changes. TRUNCATE resets the counts.
// 2. Deep pages from the index: every list sort, in each direction and under each filter, has
//    an index whose order is the list's, so a page's keys come from an index-only scan.
//    Users break ties by id ascending in both directions, so a descending sort needs
//    (column desc, id); orders break ties in the sort's direction, which a backward scan gives.
// 3. cursor_secrets: the key that signs list cursors, made once and shared by every instance.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table row_counts (
      name  text not null,
      shard smallint not null,
      n     bigint not null,
      primary key (name, shard)
    )`.execute(db);
  await sql`
    insert into row_counts (name, shard, n)
    select 'users', 0, count(*) from users
    union all select 'orders', 0, count(*) from orders
    union all select 'orders:' || status, 0, count(*) from orders group by status`.execute(db);

  // Adds each (name, delta) to a random shard. Rows in name order, so two transactions take
  // their row locks in the same order.
  await sql`
    create function row_counts_add(names text[], deltas bigint[]) returns void language sql as $$
      insert into row_counts (name, shard, n)
      select d.name, floor(random() * 16)::smallint, d.delta
        from unnest(names, deltas) as d(name, delta)
       where d.delta <> 0
       order by d.name
      on conflict (name, shard) do update set n = row_counts.n + excluded.n
    $$`.execute(db);

  await sql`
    create function users_count_rows() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        perform row_counts_add(array['users'], array[(select count(*) from new_rows)]);
      elsif tg_op = 'DELETE' then
        perform row_counts_add(array['users'], array[-(select count(*) from old_rows)]);
      else
        delete from row_counts where name = 'users';
      end if;
      return null;
    end $$`.execute(db);
  await sql`create trigger users_count_insert after insert on users referencing new table as new_rows
    for each statement execute function users_count_rows()`.execute(db);
  await sql`create trigger users_count_delete after delete on users referencing old table as old_rows
    for each statement execute function users_count_rows()`.execute(db);
  await sql`create trigger users_count_truncate after truncate on users
    for each statement execute function users_count_rows()`.execute(db);

  await sql`
    create function orders_count_rows() returns trigger language plpgsql as $$
    declare
      names  text[];
      deltas bigint[];
    begin
      if tg_op = 'INSERT' then
        select array_agg(name), array_agg(n) into names, deltas from (
          select 'orders' as name, count(*) as n from new_rows
          union all select 'orders:' || status, count(*) from new_rows group by status) c;
      elsif tg_op = 'DELETE' then
        select array_agg(name), array_agg(-n) into names, deltas from (
          select 'orders' as name, count(*) as n from old_rows
          union all select 'orders:' || status, count(*) from old_rows group by status) c;
      elsif tg_op = 'UPDATE' then
        names := array['orders:' || old.status, 'orders:' || new.status];
        deltas := array[-1, 1];
      else
        delete from row_counts where name = 'orders' or name like 'orders:%';
        return null;
      end if;
      perform row_counts_add(names, deltas);
      return null;
    end $$`.execute(db);
  await sql`create trigger orders_count_insert after insert on orders referencing new table as new_rows
    for each statement execute function orders_count_rows()`.execute(db);
  await sql`create trigger orders_count_delete after delete on orders referencing old table as old_rows
    for each statement execute function orders_count_rows()`.execute(db);
  await sql`create trigger orders_count_status after update of status on orders
    for each row when (old.status is distinct from new.status) execute function orders_count_rows()`.execute(db);
  await sql`create trigger orders_count_truncate after truncate on orders
    for each statement execute function orders_count_rows()`.execute(db);

  for (const column of ['name', 'email', 'created_at']) {
    await sql`create index ${sql.raw(`users_${column}_desc_id_idx`)} on users (${sql.raw(column)} desc, id)`.execute(
      db,
    );
  }
  for (const [name, columns] of [
    ['orders_status_total_id_idx', 'status, total, id'],
    ['orders_customer_id_idx', 'customer_id, id'],
    ['orders_customer_total_id_idx', 'customer_id, total, id'],
    ['orders_customer_status_id_idx', 'customer_id, status, id'],
    ['orders_customer_status_total_id_idx', 'customer_id, status, total, id'],
  ] as const) {
    await sql`create index ${sql.raw(name)} on orders (${sql.raw(columns)})`.execute(db);
  }

  await sql`
    create table cursor_secrets (
      id     smallint primary key constraint cursor_secrets_one_row check (id = 1),
      secret text not null
    )`.execute(db);
}
