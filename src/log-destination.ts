// Where the JSON log lines go: pino's own asynchronous destination (sonic-boom), handed one
// string per event-loop turn instead of one per line, with a bound on what waits for stdout.
//
// sonic-boom appends each line to its pending buffer string and measures that whole buffer
// (Buffer.byteLength) at every write. A buffer built by appends is a rope, so measuring it
// copies it flat: each line would pay for copying the kilobytes gathered before it, and leave
// the copy as garbage. Here the lines of one turn are joined once and written once; sonic-boom
// keeps doing what it does well (batching write(2) calls, retrying EAGAIN on pipes, flushing at
// exit).
//
// The periodic flush is ours too. sonic-boom's own (`periodicFlush`) flushes on every tick, and
// with `minLength` set a flush with nothing buffered is still a write of zero bytes: an idle
// process would make ten write(2) calls a second on a thread-pool thread, each waking the event
// loop. Ours flushes only when something may be buffered: lines were handed over, or a write left
// a remainder behind it.
//
// A stdout that stops taking lines (a stalled pipe, a log shipper that hangs) must not take the
// process's memory with it (docs/operations.md#logs): at most MAX_BUFFERED_BYTES wait, and what
// does not fit is dropped (sonic-boom's maxLength), counted (log_lines_dropped_total), and told in
// one warn line once stdout takes lines again, at most one a minute.
import { pino } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

export interface TurnBatchedOptions {
  /** Flush what sonic-boom holds back (below its `minLength`) this often; 0: never on a timer. */
  flushEveryMs?: number;
  /** The target's bound (its `maxLength`): lines are counted as dropped when it refuses them. */
  maxBufferedBytes?: number;
  /**
   * Told how many lines were dropped since it was last told: once the target has written down to
   * half its bound (so that the line it writes has room), at most once every `reportEveryMs`.
   */
  onDropped?: (lines: number) => void;
  reportEveryMs?: number;
}

export class TurnBatchedDestination {
  #lines: string[] = [];
  #scheduled = false;
  /** Something may be buffered in the target since its last flush. */
  #unflushed = false;
  /** Bytes handed to the target and not yet written by it (tracked only with a bound). */
  #pending = 0;
  /** Counts the target's 'drop' events, which it emits inside write(). */
  #refusals = 0;
  #dropped = 0;
  #unreported = 0;
  #reportedAt = -Infinity;
  readonly #target: SonicBoom;
  readonly #bound: number;
  readonly #onDropped: ((lines: number) => void) | undefined;
  readonly #reportEveryMs: number;

  constructor(
    target: SonicBoom,
    { flushEveryMs = 0, maxBufferedBytes = 0, onDropped, reportEveryMs = 60_000 }: TurnBatchedOptions = {},
  ) {
    this.#target = target;
    this.#bound = maxBufferedBytes;
    this.#onDropped = onDropped;
    this.#reportEveryMs = reportEveryMs;
    if (flushEveryMs > 0 || maxBufferedBytes > 0) {
      // A completed write may leave bytes behind it (sonic-boom writes on only past minLength);
      // a write of zero bytes (a flush of nothing) leaves none, so it schedules no other.
      target.on('write', (bytes: number) => {
        if (bytes > 0) this.#unflushed = true;
        if (this.#bound > 0) {
          this.#pending = Math.max(0, this.#pending - bytes);
          this.#report();
        }
      });
    }
    if (maxBufferedBytes > 0) {
      target.on('drop', (data: string) => {
        this.#refusals++;
        const lines = countLines(data);
        this.#dropped += lines;
        this.#unreported += lines;
      });
    }
    if (flushEveryMs > 0) setInterval(() => this.tick(), flushEveryMs).unref();
    // pino flushes sonic-boom synchronously at exit; the lines of the last turn go first.
    process.once('exit', () => {
      try {
        this.flushSync();
      } catch {
        // the descriptor is gone: nothing left to write to
      }
    });
  }

  /** pino's write: one serialized line, newline included. */
  write(line: string): boolean {
    this.#lines.push(line);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#endOfTurn);
    }
    return true;
  }

  readonly #endOfTurn = (): void => {
    this.#scheduled = false;
    this.#handOver();
  };

  #handOver(): void {
    const lines = this.#lines;
    if (lines.length === 0) return;
    this.#lines = [];
    this.#unflushed = true;
    const text = lines.length === 1 ? (lines[0] as string) : lines.join('');
    if (this.#bound === 0) {
      this.#target.write(text);
      return;
    }
    const refusalsBefore = this.#refusals;
    this.#target.write(text);
    if (this.#refusals === refusalsBefore) this.#pending += Buffer.byteLength(text);
  }

  /** Lines the target refused since the process started (its buffer was full). */
  get droppedLines(): number {
    return this.#dropped;
  }

  /** Tells onDropped of the lines dropped since last told, when there is room to say it. */
  #report(): void {
    if (this.#unreported === 0 || this.#onDropped === undefined || this.#pending > this.#bound / 2) return;
    const now = performance.now();
    if (now - this.#reportedAt < this.#reportEveryMs) return;
    this.#reportedAt = now;
    const lines = this.#unreported;
    this.#unreported = 0;
    this.#onDropped(lines);
  }

  /** The periodic flush: only when something may be waiting in the target. */
  tick(): void {
    if (this.#bound > 0) this.#report();
    if (!this.#unflushed) return;
    this.#unflushed = false;
    this.#target.flush();
  }

  /** logger.flush(): everything written so far, out to the file descriptor. */
  flush(callback?: (error?: Error) => void): void {
    this.#handOver();
    this.#target.flush(callback);
  }

  flushSync(): void {
    this.#handOver();
    this.#target.flushSync();
  }

  end(): void {
    this.#handOver();
    this.#target.end();
  }
}

/**
 * sonic-boom's options here: asynchronous, in batches of at least 48 KiB (or FLUSH_EVERY_MS), up
 * to 64 KiB a write. Each write is a hop to the thread pool and back (a thread woken, the loop
 * woken); at sonic-boom's own bound of 16 KiB a write, a busy process paid that every ~50 lines,
 * a cost the side-by-side runs could see (docs/benchmark-log.md, "What moved the numbers").
 */
export const SONIC_BOOM_OPTIONS = { sync: false, minLength: 48 * 1024, maxWrite: 64 * 1024 } as const;

/** A line waits at most this long in the buffer. */
export const FLUSH_EVERY_MS = 100;

/**
 * At most this much waits for stdout: a few seconds of lines at a busy instance's rate, so that a
 * short stall loses nothing and a long one costs 16 MiB, not the process.
 */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

export interface LogDestinationOptions {
  /** Told of dropped lines (TurnBatchedOptions.onDropped). */
  onDropped?: (lines: number) => void;
  maxBufferedBytes?: number;
  reportEveryMs?: number;
}

/** The production destination: stdout unless told otherwise. */
export function logDestination(
  fd = 1,
  { maxBufferedBytes = MAX_BUFFERED_BYTES, ...options }: LogDestinationOptions = {},
): TurnBatchedDestination {
  return new TurnBatchedDestination(
    pino.destination({ dest: fd, ...SONIC_BOOM_OPTIONS, maxLength: maxBufferedBytes }),
    { flushEveryMs: FLUSH_EVERY_MS, maxBufferedBytes, ...options },
  );
}

function countLines(text: string): number {
  let lines = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) lines++;
  return lines;
}
