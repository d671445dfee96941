import { describe, expect, it } from 'vitest';
import { PooledIdGenerator } from './ids.js';

describe('PooledIdGenerator', () => {
  it('gives 32- and 16-digit lowercase hex ids, none repeated, across refills of its pool', () => {
    const ids = new PooledIdGenerator();
    const traces = new Set<string>();
    const spans = new Set<string>();
    // 4 KiB a pool: 3,000 of each is 72 KiB, eighteen refills.
    for (let i = 0; i < 3000; i++) {
      const trace = ids.generateTraceId();
      const span = ids.generateSpanId();
      expect(trace).toMatch(/^[0-9a-f]{32}$/);
      expect(span).toMatch(/^[0-9a-f]{16}$/);
      traces.add(trace);
      spans.add(span);
    }
    expect(traces.size).toBe(3000);
    expect(spans.size).toBe(3000);
  });

  it('uses every hex digit in every position (random bytes, not a counter or a constant)', () => {
    const ids = new PooledIdGenerator();
    const seen = Array.from({ length: 32 }, () => new Set<string>());
    for (let i = 0; i < 2000; i++) {
      const id = ids.generateTraceId();
      for (let at = 0; at < id.length; at++) seen[at]!.add(id.charAt(at));
    }
    for (const digits of seen) expect(digits.size).toBe(16);
  });

  it('two generators give different ids', () => {
    expect(new PooledIdGenerator().generateTraceId()).not.toBe(new PooledIdGenerator().generateTraceId());
  });

  it('withTraceId: the given trace id is drawn once inside it, and never after it, drawn or not', () => {
    const ids = new PooledIdGenerator();
    const given = 'a'.repeat(32);
    const inside = ids.withTraceId(given, () => [ids.generateTraceId(), ids.generateTraceId()]);
    expect(inside[0]).toBe(given);
    expect(inside[1]).not.toBe(given);
    ids.withTraceId(given, () => ids.generateSpanId()); // not drawn
    expect(ids.generateTraceId()).not.toBe(given);
    expect(() =>
      ids.withTraceId(given, () => {
        throw new Error('start failed');
      }),
    ).toThrow('start failed');
    expect(ids.generateTraceId()).not.toBe(given);
  });
});
