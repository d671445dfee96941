// Where the JSON log lines go: pino's own asynchronous destination (sonic-boom), handed one
// string per event-loop turn instead of one per line.
//
// sonic-boom appends each line to its pending buffer string and measures that whole buffer
// (Buffer.byteLength) at every write. A buffer built by appends is a rope, so measuring it
// copies it flat: under load, each request's line paid for copying the kilobytes gathered before
// it, and left the copy as garbage (docs/benchmark.md, "What moved the numbers"). Here the lines
// of one turn are joined once and written once; sonic-boom keeps doing what it does well
// (batching write(2) calls, retrying EAGAIN on pipes, flushing at exit).
import { pino } from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

export class TurnBatchedDestination {
  #lines: string[] = [];
  #scheduled = false;
  readonly #target: SonicBoom;

  constructor(target: SonicBoom) {
    this.#target = target;
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
    this.#target.write(lines.length === 1 ? (lines[0] as string) : lines.join(''));
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

/** sonic-boom's options here: asynchronous, in batches of at least 12 KiB or 100 ms. */
export const SONIC_BOOM_OPTIONS = { sync: false, minLength: 12 * 1024, periodicFlush: 100 } as const;

/** The production destination: stdout unless told otherwise. */
export function logDestination(fd = 1): TurnBatchedDestination {
  return new TurnBatchedDestination(pino.destination({ dest: fd, ...SONIC_BOOM_OPTIONS }));
}
