// Paging rules every list shares (spec 4.1 rule 4, 8; DESIGN §3, §5): zero-based pages, and a
// size above 100 served as 100, not refused.

export const MAX_PAGE_SIZE = 100;

/** One page of a list, as a service returns it; http/pagination.ts makes the envelope. */
export interface PageOf<T> {
  content: T[];
  total: number;
  page: number;
  size: number;
}

/** The size actually served, and the rows to skip. */
export function pageWindow(page: number, requestedSize: number): { size: number; offset: number } {
  const size = Math.min(requestedSize, MAX_PAGE_SIZE);
  return { size, offset: page * size };
}
