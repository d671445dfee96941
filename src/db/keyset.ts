// The SQL of a list page, shared by users and orders (docs/lists.md): a page found by its
// number reads its keys from the sort's index and then just those rows (a deferred join); a
// page found by a cursor seeks past the key of the row before it (keyset pagination). Both
// return each row's sort value as exact text, from which the next cursor is made.
//
// Column names and directions reach the SQL text only from each repository's fixed tables,
// never from a request; values are always bound.
import { sql, type RawBuilder } from 'kysely';
import type { Seek, SortDirection } from '../page.js';

/** A list's order: its sort column, then id (the tie-breaker) in its own direction. */
export interface ListOrder {
  column: string;
  /**
   * The column's SQL type. A cursor's value is bound as text and cast in SQL: a driver that
   * learns the parameter is a timestamptz would serialize it through a JS Date, dropping the
   * microseconds, and the seek would land on the cursor's own row again.
   */
  type: 'bigint' | 'text' | 'timestamptz' | 'numeric';
  direction: SortDirection;
  /** Ignored when column is id. */
  idDirection: SortDirection;
}

/**
 * How a page is found: by its number (offset), by its number counted from the list's end
 * (the deep half of a list: the same index read backwards, so the last page costs what the first
 * does), or after or before a cursor's row.
 */
export type PageMode = 'offset' | 'offset-from-end' | 'after' | 'before';

/** From this offset on, a page in the second half of its list is counted from the end. */
export const FROM_THE_END_AFTER = 10_000;

export function pageMode(seek: Seek | undefined): PageMode {
  return seek === undefined ? 'offset' : seek.after ? 'after' : 'before';
}

const flip = (d: SortDirection): SortDirection => (d === 'asc' ? 'desc' : 'asc');

/** `order by` for the list's order (reversed: for the rows before a cursor, nearest first). */
function orderBy(order: ListOrder, alias: string, reversed: boolean): RawBuilder<unknown> {
  const dir = (d: SortDirection) => sql.raw(reversed ? flip(d) : d);
  const col = sql.ref(`${alias}.${order.column}`);
  if (order.column === 'id') return sql`${col} ${dir(order.direction)}`;
  return sql`${col} ${dir(order.direction)}, ${sql.ref(`${alias}.id`)} ${dir(order.idDirection)}`;
}

/**
 * Rows strictly after (or before) the row whose sort value and id are given, in the list's
 * order. Same directions: one row comparison, which the index bounds. Mixed directions (users
 * sorted descending, ties by ascending id): the column's bound for the index, then the tie rule.
 */
function seekCondition(order: ListOrder, after: boolean, value: unknown, id: unknown): RawBuilder<unknown> {
  const op = (d: SortDirection) => sql.raw((d === 'asc') === after ? '>' : '<');
  const col = sql.ref(order.column);
  value = sql`cast(cast(${value} as text) as ${sql.raw(order.type)})`;
  if (order.column === 'id') return sql`id ${op(order.direction)} ${id}`;
  if (order.direction === order.idDirection) {
    return sql`(${col}, id) ${op(order.direction)} (${value}, ${id})`;
  }
  const bound = sql.raw((order.direction === 'asc') === after ? '>=' : '<=');
  return sql`${col} ${bound} ${value} and (${col} ${op(order.direction)} ${value} or (${col} = ${value} and id ${op(order.idDirection)} ${id}))`;
}

/**
 * One page of `table` under `filters` (a SQL condition, or undefined), selecting `columns` of
 * the table and the sort value as text (`sort_key`).
 *
 * - offset: the page's ids (and sort values) from an index-only scan over the sort's index,
 *   limit and offset applied there, then those rows by primary key; offset-from-end: the same
 *   in reverse (the caller reverses the rows);
 * - after/before: the rows past the cursor's row, by a seek on the same index; `before` reads
 *   backwards, so the caller reverses the rows.
 */
export function pageQuery(args: {
  table: string;
  columns: readonly string[];
  filters: RawBuilder<unknown> | undefined;
  order: ListOrder;
  mode: PageMode;
  limit: unknown;
  offset: unknown;
  seekValue: unknown;
  seekId: unknown;
}): RawBuilder<unknown> {
  const { table, order, mode } = args;
  const t = sql.table(table);
  const selected = sql.join(args.columns.map((c) => sql.ref(`r.${c}`)));
  const sortKey = sql`${sql.ref(`r.${order.column}`)}::text as sort_key`;
  if (mode === 'offset' || mode === 'offset-from-end') {
    const reversed = mode === 'offset-from-end';
    const keyColumns = order.column === 'id' ? sql`id` : sql`id, ${sql.ref(order.column)}`;
    const where = args.filters === undefined ? sql`` : sql`where ${args.filters}`;
    return sql`select ${selected}, ${sortKey}
      from (select ${keyColumns} from ${t} ${where} order by ${orderBy(order, table, reversed)}
            limit ${args.limit} offset ${args.offset}) k
      join ${t} r on r.id = k.id
      order by ${orderBy(order, 'k', reversed)}`;
  }
  const seek = seekCondition(order, mode === 'after', args.seekValue, args.seekId);
  const where = args.filters === undefined ? seek : sql`${args.filters} and ${seek}`;
  return sql`select ${selected}, ${sortKey} from ${t} r
    where ${where} order by ${orderBy(order, 'r', mode === 'before')} limit ${args.limit}`;
}

/**
 * A page and the list's total, however the page is asked for. Near the start, and by cursor,
 * the page and the total are sent together (pipelined). A deep page by number needs the total
 * first: in the list's second half it is read from the end, `after` rows from the end.
 */
export async function pageAndTotal<R>(
  p: { offset: number; limit: number; seek?: Seek | undefined },
  count: () => Promise<number>,
  page: (mode: PageMode, limit: number, offset: number) => Promise<R[]>,
): Promise<{ rows: R[]; total: number }> {
  const mode = pageMode(p.seek);
  if (mode === 'offset' && p.offset >= FROM_THE_END_AFTER) {
    const total = await count();
    if (p.offset >= total) return { rows: [], total };
    const after = total - p.offset - p.limit;
    if (after < p.offset) {
      const rows = await page('offset-from-end', Math.min(p.limit, total - p.offset), Math.max(after, 0));
      return { rows: rows.reverse(), total };
    }
    return { rows: await page('offset', p.limit, p.offset), total };
  }
  const [rows, total] = await Promise.all([page(mode, p.limit, p.offset), count()]);
  if (mode === 'before') rows.reverse();
  return { rows, total };
}
