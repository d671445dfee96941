// Which connection of the pool a statement goes to (docs/architecture.md, "Choosing a
// connection"). Plain statements share few connections: the first free one with room in its
// pipeline, where postgres.js pipelines them and concurrent reads travel in few writes. A heavy
// write outside a transaction (`spread`) goes to the least loaded free connection instead, so
// that writes spread over the backends and never sit in the reads' pipeline; a transaction
// takes the least loaded one too (ideally idle, so that it starts at once).
//
// What waits for a connection is placed more strictly, so that a connection that frees up (or
// opens after an outage) does not take the whole queue onto one backend: a plain statement only
// where its pipeline has room, a write only on a connection with nothing in flight.

/** What the choice reads of a connection. */
export interface Choosable {
  readonly state: 'down' | 'opening' | 'open';
  readonly reserved: boolean;
  readonly retiring: boolean;
  readonly inflight: number;
}

/** Open, held by no transaction, not about to be replaced: it may take a new statement. */
export function isFree(connection: Choosable): boolean {
  return connection.state === 'open' && !connection.reserved && !connection.retiring;
}

/**
 * A plain statement's connection: the first free one with room in its pipeline; past
 * `pipelineDepth` statements in flight on every free one, the least loaded.
 */
export function forPlain<C extends Choosable>(connections: readonly C[], pipelineDepth: number): C | undefined {
  let best: C | undefined;
  for (const connection of connections) {
    if (!isFree(connection)) continue;
    if (connection.inflight < pipelineDepth) return connection;
    if (best === undefined || connection.inflight < best.inflight) best = connection;
  }
  return best;
}

/** A spread statement's or a transaction's connection: the least loaded free one. */
export function leastLoaded<C extends Choosable>(connections: readonly C[]): C | undefined {
  let best: C | undefined;
  for (const connection of connections) {
    if (!isFree(connection)) continue;
    if (best === undefined || connection.inflight < best.inflight) best = connection;
    if (best.inflight === 0) break;
  }
  return best;
}

/** What waits: a transaction, a spread statement, or a plain one. */
export type Need = 'reserve' | 'spread' | 'plain';

/**
 * The connection for what has waited, or undefined while it must wait on: a transaction takes
 * the least loaded free connection, a spread statement an idle one, a plain statement one whose
 * pipeline has room.
 */
export function forWaiting<C extends Choosable>(
  connections: readonly C[],
  need: Need,
  pipelineDepth: number,
): C | undefined {
  if (need === 'reserve') return leastLoaded(connections);
  const room = need === 'spread' ? 1 : pipelineDepth;
  for (const connection of connections) if (isFree(connection) && connection.inflight < room) return connection;
  return undefined;
}
