// Paging rules every list shares (8; docs/api-guide.md#users, docs/api-guide.md#orders): zero-based pages, and a
// size above 100 served as 100, not refused.

export const MAX_PAGE_SIZE = 100;

/** One page of a list, as a service returns it; http/paging/pagination.ts makes the envelope. */
export interface PageOf<T> {
  content: T[];
  total: number;
  page: number;
  size: number;
  /** The sort keys of the first and last rows (absent when empty): the links' cursors. */
  edges?: { first: RowKey; last: RowKey };
}

/** Where a row sits in a list's order: its sort value as exact text, and its id. */
export interface RowKey {
  value: string;
  id: number;
}

/** A page found by a cursor: the rows just after (next) or just before (prev) a row's key. */
export interface Seek extends RowKey {
  after: boolean;
}

/** The edges of a page of rows that carry their sort key (`sort_key`) and id. */
export function edgesOf(rows: readonly { id: number; sort_key: string }[]): PageOf<unknown>['edges'] {
  const first = rows[0];
  const last = rows[rows.length - 1];
  if (first === undefined || last === undefined) return undefined;
  return { first: { value: first.sort_key, id: first.id }, last: { value: last.sort_key, id: last.id } };
}

export type SortDirection = 'asc' | 'desc';

/**
 * `sort=field[,asc|desc]` → field and direction. The route's schema has
 * already checked the pattern; each list has its own default direction.
 */
export function parseSort<F extends string>(
  sort: string,
  fields: readonly F[],
  defaultDirection: SortDirection,
): { sort: F; direction: SortDirection } {
  const [field, dir] = sort.split(',');
  const known = fields.find((f) => f === field);
  if (known === undefined) throw new RangeError(`Unknown sort field: ${String(field)}`);
  const direction = dir?.toLowerCase();
  return { sort: known, direction: direction === 'asc' || direction === 'desc' ? direction : defaultDirection };
}

/** The size actually served, and the rows to skip. */
export function pageWindow(page: number, requestedSize: number): { size: number; offset: number } {
  const size = Math.min(requestedSize, MAX_PAGE_SIZE);
  return { size, offset: page * size };
}
