// A transaction's connection, from BEGIN to COMMIT or ROLLBACK (postgres-pool.ts, reserve): the
// pool hands it one free connection, no plain statement is sent there meanwhile, and if the
// connection ends under it every statement of it fails at once and nothing more can be sent.
import type { PendingQuery, ReservedSql, Row, Sql } from 'postgres';
import { connectionLost } from './driver-client.js';
import type { Reservation } from './pool-options.js';
import type { PoolConnection } from './pool-connection.js';

/** What a reservation asks of its pool. */
export interface ReservationHooks {
  /**
   * One statement on the reserved connection, as the pool sends them (counted as sent);
   * `simple`: several statements without parameters, in one simple query.
   */
  statement(reserved: ReservedSql, text: string, parameters: readonly unknown[], simple: boolean): PendingQuery<Row[]>;
  /** A statement of the transaction failed with `error` on `sql`'s life. */
  failed(sql: Sql, error: unknown): void;
  /** The transaction is over: the connection goes to what waits. */
  release(): void;
}

const noop = (): void => {};

/** Reserves `connection` (free and open, handed over by the pool) for one transaction. */
export async function reserveOn(connection: PoolConnection, hooks: ReservationHooks): Promise<Reservation> {
  connection.reserved = true;
  const { sql } = connection;
  if (sql === undefined || connection.state !== 'open') {
    // It ended in the turn between being handed over and being taken.
    hooks.release();
    throw connectionLost();
  }
  let isLost = false;
  let lose: (error: Error) => void = noop;
  const lost = new Promise<never>((_, reject) => (lose = reject));
  lost.catch(noop);
  connection.onClose = () => {
    isLost = true;
    lose(connectionLost());
  };
  let reserved: ReservedSql;
  try {
    // postgres.js hands the connection over once the statements already in flight are answered.
    reserved = await Promise.race([sql.reserve(), lost]);
  } catch (error) {
    connection.onClose = undefined;
    hooks.release();
    throw error;
  }
  let released = false;
  return {
    isLost: () => isLost,
    run: (text, parameters, simple = false) => {
      if (isLost) return Promise.reject(connectionLost());
      const pending = hooks.statement(reserved, text, parameters, simple);
      connection.sent(pending, false);
      return pending.then(
        (rows) => {
          connection.settled(pending, false);
          return rows;
        },
        (error: unknown) => {
          connection.settled(pending, false);
          hooks.failed(sql, error);
          throw error;
        },
      );
    },
    release: () => {
      if (released) return;
      released = true;
      connection.onClose = undefined;
      if (!isLost) reserved.release();
      hooks.release();
    },
  };
}
