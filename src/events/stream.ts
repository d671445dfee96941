// The event stream's engine (docs/webhooks.md, GET /api/v1/events): one hub per process reads new
// events and fans them out to every open stream, so a thousand streams cost one query per poll,
// not a thousand. Nothing here knows HTTP: a stream is a `write` function and a filter.
//
// Order and completeness: events are read in `(tx, sequence)` order and only below the oldest
// open transaction (events.repository.ts readStream), so a position, once passed, never gains
// a row. A stream starts at a position and catches up on its own (bounded by the hub's
// position) until it reaches the hub, then joins it in the same turn of the event loop: no row
// between the two is lost or sent twice.
import type { Principal } from '../auth/principal.js';
import type { Db } from '../db/database.js';
import type { EventPattern } from './event-types.js';
import { matchesPattern } from './event-types.js';
import {
  currentSnapshot,
  readStream,
  streamPositionOf,
  type StreamPosition,
  type StreamRow,
} from './events.repository.js';
import { toCloudEvent } from './index.js';

/** Rows per read: a poll, or one step of a stream's catch-up. */
const PAGE = 500;
/** A stream whose client reads slower than this much is buffered for it is closed; it resumes. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

const before = (a: StreamPosition, b: StreamPosition): boolean =>
  a.tx < b.tx || (a.tx === b.tx && a.sequence < b.sequence);
const positionOf = (row: StreamRow): StreamPosition => ({ tx: row.tx, sequence: BigInt(row.sequence) });

/** A pg_current_snapshot: the transactions whose rows a stream opened then already counts as seen. */
export interface Snapshot {
  xmin: bigint;
  xmax: bigint;
  inProgress: ReadonlySet<bigint>;
}

export function parseSnapshot(text: string): Snapshot {
  const [xmin = '0', xmax = '0', xip = ''] = text.split(':');
  return {
    xmin: BigInt(xmin),
    xmax: BigInt(xmax),
    inProgress: new Set(xip === '' ? [] : xip.split(',').map((x) => BigInt(x))),
  };
}

/** True when the transaction `tx` had ended (and so its rows were visible) at the snapshot. */
function endedBy(snapshot: Snapshot, tx: bigint): boolean {
  return tx < snapshot.xmin || (tx < snapshot.xmax && !snapshot.inProgress.has(tx));
}

/** Which events a stream shows (docs/api-guide.md#authentication-and-scopes, docs/webhooks.md). */
export interface StreamFilter {
  principal: Principal;
  /** Undefined: every type the caller may read. */
  types: readonly EventPattern[] | undefined;
}

/** Whether the caller may read the event and asked for its type. */
export function shows(filter: StreamFilter, row: Pick<StreamRow, 'type' | 'owner'>): boolean {
  const { principal, types } = filter;
  const scope = row.type.startsWith('order.') ? 'orders:read' : 'users:read';
  if (!principal.scopes.has(scope)) return false;
  if (!principal.admin && (row.owner === null || row.owner !== principal.userId)) return false;
  return types === undefined || types.some((pattern) => matchesPattern(row.type, pattern));
}

/** Where a stream begins: after an event it saw, or with what commits after it opened. */
export type StreamStart =
  { kind: 'resume'; position: StreamPosition } | { kind: 'now'; position: StreamPosition; snapshot: Snapshot };

/** The position of a stream opened now, or resumed after the event `lastEventId` (docs/webhooks.md). */
export async function streamStart(db: Db, lastEventId: number | undefined): Promise<StreamStart> {
  if (lastEventId !== undefined) {
    // An event no longer kept (older than EVENT_RETENTION_DAYS): replay all that is kept.
    const position = (await streamPositionOf(db, lastEventId)) ?? { tx: 0n, sequence: 0n };
    return { kind: 'resume', position };
  }
  const snapshot = parseSnapshot(await currentSnapshot(db));
  return { kind: 'now', position: { tx: snapshot.xmin, sequence: 0n }, snapshot };
}

/** One open stream: what it shows, how it writes, and how far it has got. */
export class EventStream {
  /** Rows at or before this have been sent or skipped. */
  after: StreamPosition;
  #snapshot: Snapshot | undefined;
  #closed = false;

  constructor(
    readonly filter: StreamFilter,
    start: StreamStart,
    private readonly out: {
      /** Writes a chunk; false when the client is behind (its buffer is full). */
      write: (chunk: string) => boolean;
      /** Bytes written and not yet taken by the client. */
      buffered: () => number;
      /** Ends the response. */
      end: () => void;
      /** Resolves when the client has taken what is buffered. */
      drained: () => Promise<void>;
    },
  ) {
    this.after = start.position;
    this.#snapshot = start.kind === 'now' ? start.snapshot : undefined;
  }

  /** Sends the rows (in stream order) that are after this stream's position and that it shows. */
  receive(rows: readonly StreamRow[], render: (row: StreamRow) => string): void {
    if (this.#closed) return;
    for (const row of rows) {
      const position = positionOf(row);
      if (!before(this.after, position)) continue;
      this.after = position;
      if (this.#snapshot !== undefined) {
        if (endedBy(this.#snapshot, row.tx)) continue; // committed before the stream opened
        if (row.tx >= this.#snapshot.xmax) this.#snapshot = undefined; // later rows are all newer
      }
      if (shows(this.filter, row)) this.out.write(render(row));
    }
    if (this.out.buffered() > MAX_BUFFERED_BYTES) this.close();
  }

  /** Moves the position up to `position` (nothing between them exists). */
  reach(position: StreamPosition): void {
    if (before(this.after, position)) this.after = position;
  }

  heartbeat(): void {
    if (!this.#closed) this.out.write(':\n\n');
  }

  backlogged(): boolean {
    return this.out.buffered() > 64 * 1024;
  }

  drained(): Promise<void> {
    return this.out.drained();
  }

  isClosed(): boolean {
    return this.#closed;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.out.end();
  }
}

export interface HubOptions {
  /** `source` of the CloudEvents: `<BASE_URL>/api/v1`. */
  source: string;
  /** How often the hub reads new events while streams are open. */
  pollMs: number;
  /** How often each stream gets a comment, so that proxies keep it open. */
  heartbeatMs: number;
  onError: (error: unknown) => void;
}

/** SSE message of an event: `id` is its sequence, `event` its type, `data` the CloudEvent. */
export function renderEvent(row: StreamRow, source: string): string {
  return `id: ${String(row.sequence)}\nevent: ${row.type}\ndata: ${toCloudEvent(row, source)}\n\n`;
}

/** The process's one reader of new events, for every open stream. */
export class EventHub {
  /** Streams opened and not closed, whether still catching up or joined. */
  readonly #open = new Set<EventStream>();
  /** Streams that receive what the hub reads. */
  readonly #joined = new Set<EventStream>();
  /** Set while the hub runs (some stream has joined): every row after it is still to be read. */
  #position: StreamPosition | undefined;
  #generation = 0;
  #reading = false;
  #again = false;
  #timer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly db: Db,
    private readonly options: HubOptions,
  ) {}

  get openStreams(): number {
    return this.#open.size;
  }

  #render = (row: StreamRow & { rendered?: string }): string =>
    (row.rendered ??= renderEvent(row, this.options.source));

  /**
   * Catches the stream up from its start to the hub, then joins it. Resolves once joined (or
   * closed). The stream's rows are written as they are read.
   */
  async open(stream: EventStream): Promise<void> {
    if (this.#stopped) {
      stream.close();
      return;
    }
    this.#open.add(stream);
    this.#startHeartbeat();
    for (;;) {
      if (stream.isClosed()) {
        this.remove(stream);
        return;
      }
      const until = this.#position;
      if (until !== undefined && !before(stream.after, until)) {
        // Caught up with the hub (or ahead of it): join in this turn, so nothing falls between.
        this.#joined.add(stream);
        return;
      }
      // Catching up reads only what the caller may see: without admin, its own events (in SQL,
      // by an index), not the whole outbox to filter here.
      const { principal } = stream.filter;
      const owner = principal.admin ? undefined : (principal.userId ?? null);
      const page = await readStream(this.db, stream.after, until, PAGE, owner);
      stream.receive(page.rows, this.#render);
      if (page.rows.length === PAGE) {
        if (stream.backlogged()) await stream.drained();
        continue;
      }
      // Nothing more up to `until`, or with the hub idle, below the horizon: every row up to
      // `complete` has been read, and none can still appear there.
      const complete = until ?? { tx: page.horizon, sequence: 0n };
      stream.reach(complete);
      if (this.#position === undefined && !stream.isClosed()) {
        this.#start(complete);
        this.#joined.add(stream);
        return;
      }
    }
  }

  /** The stream's client went away, or the stream was closed. */
  remove(stream: EventStream): void {
    this.#open.delete(stream);
    this.#joined.delete(stream);
    if (this.#joined.size === 0) this.#stop();
    if (this.#open.size === 0 && this.#heartbeat !== undefined) {
      clearInterval(this.#heartbeat);
      this.#heartbeat = undefined;
    }
  }

  /** New events may have been committed in this process: read them soon. */
  poke(): void {
    if (this.#position === undefined) return;
    if (this.#reading) {
      this.#again = true;
      return;
    }
    this.#schedule(0);
  }

  /** Closes every stream (shutdown): their clients see the response end and may reconnect elsewhere. */
  closeAll(): void {
    this.#stopped = true;
    for (const stream of [...this.#open]) {
      stream.close();
      this.remove(stream);
    }
  }

  #start(position: StreamPosition): void {
    this.#position = position;
    this.#generation++;
    this.#schedule(this.options.pollMs);
  }

  #stop(): void {
    this.#position = undefined;
    this.#generation++;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(ms: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const generation = this.#generation;
    this.#timer = setTimeout(() => void this.#read(generation), ms);
    this.#timer.unref();
  }

  async #read(generation: number): Promise<void> {
    this.#timer = undefined;
    this.#reading = true;
    this.#again = false;
    try {
      let more = true;
      while (more) {
        const position = this.#position;
        if (position === undefined || generation !== this.#generation) return;
        const page = await readStream(this.db, position, undefined, PAGE);
        if (generation !== this.#generation) return; // stopped (and maybe started again) meanwhile
        for (const stream of this.#joined) stream.receive(page.rows, this.#render);
        for (const stream of this.#joined) if (stream.isClosed()) this.remove(stream);
        const last = page.rows.at(-1);
        const full = page.rows.length === PAGE && last !== undefined;
        this.#position = full ? positionOf(last) : { tx: page.horizon, sequence: 0n };
        more = full || this.#takeAgain();
      }
    } catch (error) {
      this.options.onError(error);
    } finally {
      this.#reading = false;
      if (generation === this.#generation && this.#position !== undefined) this.#schedule(this.options.pollMs);
    }
  }

  /** Whether poke() asked for another read while one was running (and clears it). */
  #takeAgain(): boolean {
    const again = this.#again;
    this.#again = false;
    return again;
  }

  #startHeartbeat(): void {
    if (this.#heartbeat !== undefined) return;
    this.#heartbeat = setInterval(() => {
      for (const stream of this.#open) stream.heartbeat();
    }, this.options.heartbeatMs);
    this.#heartbeat.unref();
  }
}
