// Trace and span ids for the OpenTelemetry SDK (its IdGenerator interface): random bytes from
// the system's CSPRNG, hex-encoded 4 KiB at a time, each id a slice of that text. The SDK's own
// generator writes Math.random() into a buffer and hex-encodes it for each id, a cost every
// request pays while tracing is on, sampled or not; slicing a pooled hex string is cheaper
// (`npm run bench:tracing-sdk` times both; docs/tracing.md has the figures). Math.random's ids
// can also be told from the ones before them; these cannot.
import { randomFillSync } from 'node:crypto';
import type { IdGenerator } from '@opentelemetry/sdk-trace-node';

const POOL_BYTES = 4096;
const TRACE_ID_HEX = 32;
const SPAN_ID_HEX = 16;
const INVALID_TRACE_ID = '0'.repeat(TRACE_ID_HEX);
const INVALID_SPAN_ID = '0'.repeat(SPAN_ID_HEX);

export class PooledIdGenerator implements IdGenerator {
  readonly #bytes = Buffer.allocUnsafe(POOL_BYTES);
  #pool = '';
  #at = 0;
  /** The trace id the next generateTraceId() gives, inside withTraceId only. */
  #next: string | undefined;

  /**
   * Runs `start` with `traceId` as the trace id it draws (server-spans.ts: the id a sampling
   * decision was taken on, for the SDK's startSpan to use). Undrawn, it is gone when `start` returns.
   */
  withTraceId<T>(traceId: string, start: () => T): T {
    this.#next = traceId;
    try {
      return start();
    } finally {
      this.#next = undefined;
    }
  }

  /** `length` hex digits, fresh from the pool (refilled when it runs out). */
  #hex(length: number): string {
    if (this.#at + length > this.#pool.length) {
      randomFillSync(this.#bytes);
      this.#pool = this.#bytes.toString('hex');
      this.#at = 0;
    }
    const id = this.#pool.slice(this.#at, this.#at + length);
    this.#at += length;
    return id;
  }

  /** 32 lowercase hex digits, never all zero (W3C Trace Context's invalid id). */
  generateTraceId(): string {
    const next = this.#next;
    if (next !== undefined) {
      this.#next = undefined;
      return next;
    }
    let id = this.#hex(TRACE_ID_HEX);
    while (id === INVALID_TRACE_ID) id = this.#hex(TRACE_ID_HEX);
    return id;
  }

  /** 16 lowercase hex digits, never all zero. */
  generateSpanId(): string {
    let id = this.#hex(SPAN_ID_HEX);
    while (id === INVALID_SPAN_ID) id = this.#hex(SPAN_ID_HEX);
    return id;
  }
}
