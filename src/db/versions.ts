// The If-Match condition of a conditional write (docs/api-guide.md#products-and-stock, docs/api-guide.md#safe-retries), as a predicate on the
// table's `version` column, so that the check and the write are one statement.
import { sql, type RawBuilder } from 'kysely';
import type { IfMatch } from '../preconditions.js';

export function versionMatches(ifMatch: IfMatch | undefined): RawBuilder<boolean> {
  if (ifMatch === undefined || ifMatch === '*') return sql<boolean>`true`;
  if (ifMatch.length === 0) return sql<boolean>`false`;
  return sql<boolean>`version in (${sql.join(ifMatch)})`;
}
