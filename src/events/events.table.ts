import type { ColumnType, Generated } from 'kysely';
import type { EventType } from './event-types.js';

/** The outbox (migration 0009): one row per change, written in the change's transaction. */
export interface EventsTable {
  sequence: Generated<number>;
  id: string;
  type: EventType;
  /** `users/<id>` or `orders/<id>`. */
  subject: string;
  time: ColumnType<Date, Date, never>;
  /** The CloudEvent's `data`, as JSON text. */
  data: string;
  tx: ColumnType<string, never, never>;
  /** The user the event is about (docs/api-guide.md#authentication-and-scopes ownership): the user, or the order's customer. */
  owner: ColumnType<number | null, number, never>;
  /** The `traceparent` of the request that wrote it, while tracing is on (migration 0020). */
  trace_context: ColumnType<string | null, string | null | undefined, never>;
}
