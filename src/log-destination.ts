// Where the JSON log lines go: pino's own asynchronous destination (sonic-boom), handed one
// string per event-loop turn instead of one per line.
//
// sonic-boom appends each line to its pending buffer string and measures that whole buffer
// (Buffer.byteLength) at every write. A buffer built by appends is a rope, so measuring it
// copies it flat: under load, each request's line paid for copying the kilobytes gathered before
// it, and left the copy as garbage (docs/benchmark-log.md, "What moved the numbers"). Here the lines
// of one turn are joined once and written once; sonic-boom keeps doing what it does well
// (batching write(2) calls, retrying EAGAIN on pipes, flushing at exit).
//
// The periodic flush is ours too. sonic-boom's own (`periodicFlush`) flushes on every tick, and
// with `minLength` set a flush with nothing buffered is still a write of zero bytes: an idle
// process made ten write(2) calls a second on a thread-pool thread, each waking the event loop.
// Ours flushes only when something may be buffered: lines were handed over, or a write left a
// remainder behind it.
import { pino } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

export interface TurnBatchedOptions {
  /** Flush what sonic-boom holds back (below its `minLength`) this often; 0: never on a timer. */
  flushEveryMs?: number;
}

export class TurnBatchedDestination {
  #lines: string[] = [];
  #scheduled = false;
  /** Something may be buffered in the target since its last flush. */
  #unflushed = false;
  readonly #target: SonicBoom;

  constructor(target: SonicBoom, { flushEveryMs = 0 }: TurnBatchedOptions = {}) {
    this.#target = target;
    if (flushEveryMs > 0) {
      // A completed write may leave bytes behind it (sonic-boom writes on only past minLength);
      // a write of zero bytes (a flush of nothing) leaves none, so it schedules no other.
      target.on('write', (bytes: number) => {
        if (bytes > 0) this.#unflushed = true;
      });
      setInterval(() => this.tick(), flushEveryMs).unref();
    }
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
    this.#target.write(lines.length === 1 ? (lines[0] as string) : lines.join(''));
  }

  /** The periodic flush: only when something may be waiting in the target. */
  tick(): void {
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
 * woken); at sonic-boom's own bound of 16 KiB a write, a busy process paid that every ~50 lines:
 * 1/0.941 of this configuration's CPU a request for GET by id, 1/0.982 for the 304 read, side by
 * side (docs/benchmark-log.md, "What moved the numbers").
 */
export const SONIC_BOOM_OPTIONS = { sync: false, minLength: 48 * 1024, maxWrite: 64 * 1024 } as const;

/** A line waits at most this long in the buffer. */
export const FLUSH_EVERY_MS = 100;

/** The production destination: stdout unless told otherwise. */
export function logDestination(fd = 1): TurnBatchedDestination {
  return new TurnBatchedDestination(pino.destination({ dest: fd, ...SONIC_BOOM_OPTIONS }), {
    flushEveryMs: FLUSH_EVERY_MS,
  });
}
