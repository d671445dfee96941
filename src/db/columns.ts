// Column types shared by more than one table.
import type { ColumnType } from 'kysely';

/** numeric columns are read as strings (exact) and written as strings; see money.ts. */
export type Numeric = ColumnType<string, string, string>;
