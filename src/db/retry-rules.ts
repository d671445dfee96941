// When a statement that failed is sent again (docs/architecture.md, "How a connection lives and
// dies"). Only what its caller declared safe to repeat (`repeatable`: a read by key) is sent
// twice after its connection was lost: a select can write (`select * from webhook_claim(…)`
// takes a lease), and a write whose connection died may have committed. A statement function
// dropped under the running service (statement-functions.ts) changed nothing: its statement
// goes once more as text.
import { endsConnection } from './pg-errors.js';
import { isMissingFunction } from './statement-functions.js';

/** What failed, and where: the connection's life and whether the pool is ending. */
export interface Failure {
  error: unknown;
  repeatable: boolean;
  /** When the connection it failed on opened (performance.now()). */
  openedAt: number;
  /** When the first connection it was sent on was lost; undefined on its first sending. */
  firstLostAt: number | undefined;
  /** The pool is ending: nothing is sent again. */
  ended: boolean;
}

/**
 * `connection`: sent again on another connection, `text`: again as text (its function is gone),
 * undefined: the failure is the answer.
 */
export function sendAgain(failure: Failure): 'connection' | 'text' | undefined {
  const { error } = failure;
  if (endsConnection(error)) {
    // A connection that did not answer in time (CONNECTION_UNANSWERED) may be one of many on a
    // silent path: its statements fail at once rather than wait out another connection's silence.
    if (!failure.repeatable || failure.ended || (error as { code?: unknown }).code === 'CONNECTION_UNANSWERED')
      return undefined;
    // Once; and again while the connection that failed it was open before the first one died (a
    // server restart closes them all, and a pool whose process was busy learns it one connection
    // at a time): at most once per connection of the pool.
    return failure.firstLostAt === undefined || failure.openedAt < failure.firstLostAt ? 'connection' : undefined;
  }
  if (isMissingFunction(error) && failure.firstLostAt === undefined) return 'text';
  return undefined;
}
