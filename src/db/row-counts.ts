// Exact row counts without counting (migration 0008): triggers keep them in row_counts, in the
// same transaction as every insert, delete and status change, spread over 128 shard rows (migration 0014) so that
// concurrent writers rarely wait on one another. A read sums the shards: up to 128 small rows.
import { sql, type RawBuilder } from 'kysely';

/** The counters kept: users, orders, and orders per status. */
export type CountName = 'users' | 'orders' | `orders:${string}`;

/** `select count` of one counter, for a page's total. */
export function countOf(name: CountName | RawBuilder<unknown>): RawBuilder<{ count: number }> {
  return sql`select coalesce(sum(n), 0)::bigint as count from row_counts where name = ${name}`;
}
