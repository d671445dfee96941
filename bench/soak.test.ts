import { describe, expect, it, vi } from 'vitest';
import { fittedTrend, judgeSoak, sampledWhile, type Slice } from './soak.js';

const SLICE = 30;

/**
 * RSS a second under a garbage collector's saw: from `low` up to `low + swing` and down again
 * every `period` seconds, its floor rising `growthPerMinute` MiB a minute (0: no leak).
 */
function sawtooth(minutes: number, low: number, swing: number, period: number, growthPerMinute: number): Slice[] {
  const slices: Slice[] = [];
  for (let s = 0; s < (minutes * 60) / SLICE; s++) {
    const rss: number[] = [];
    for (let t = s * SLICE; t < (s + 1) * SLICE; t++)
      rss.push(low + (growthPerMinute * t) / 60 + (swing * (t % period)) / period);
    slices.push({ rps: 11_000, rss });
  }
  return slices;
}

describe('the soak verdict', () => {
  it('holds for a saw with no growth, although the last second sits at a high and the first at a low', () => {
    // The mixed soak of 2026-11-25: 224–332 MiB every minute. With a 20-s period the first
    // slice ends at a low and the last at a high: one sample each read 1.32×, and "decays".
    const slices = sawtooth(10, 224, 108, 20, 0);
    const last = slices.at(-1)?.rss.at(-1) ?? NaN;
    const first = slices[0]?.rss.at(0) ?? NaN;
    expect(last / first).toBeGreaterThan(1.2); // the old check's two samples
    const verdict = judgeSoak(slices, SLICE);
    expect(verdict.rss.median).toBeCloseTo(1, 2);
    expect(verdict.holds).toBe(true);
  });

  it('decays for a leak that lifts the saw by a quarter over ten minutes', () => {
    // 7 MiB a minute: from a median of ~280 MiB in the first minute to ~343 in the last.
    const verdict = judgeSoak(sawtooth(10, 224, 108, 20, 7), SLICE);
    expect(verdict.rss.median).toBeGreaterThan(1.2);
    expect(verdict.rss.low).toBeGreaterThan(1.2);
    expect(verdict.holds).toBe(false);
  });

  it('holds for a slow growth under the line, and says how much', () => {
    const verdict = judgeSoak(sawtooth(10, 224, 108, 20, 3), SLICE);
    expect(verdict.rss.median).toBeGreaterThan(1.05);
    expect(verdict.rss.median).toBeLessThan(1.2);
    expect(verdict.holds).toBe(true);
  });

  it('decays when throughput falls, whatever the memory does', () => {
    const slices = sawtooth(10, 224, 108, 20, 0).map((s, i) => ({ ...s, rps: 13_800 - i * 450 }));
    const verdict = judgeSoak(slices, SLICE);
    expect(verdict.trend).toBeLessThan(0.95);
    expect(verdict.lastOverFirst).toBeLessThan(0.95);
    expect(verdict.holds).toBe(false);
  });

  it('judges throughput by the fitted line, not by two minutes of scatter', () => {
    // The GET soak of docs/benchmark-log.md's earlier run: slices scatter ±15% in no order, and the
    // first is the highest of all. Last minute / first: 0.87×; the fitted line: 1.04×.
    const rps = [
      4366, 3556, 3191, 3376, 3150, 3746, 3622, 4311, 3747, 3738, 3869, 4149, 4219, 3628, 3782, 4038, 4234, 3715, 3521,
      3392,
    ];
    const slices = rps.map((r) => ({ rps: r, rss: [220] }));
    const verdict = judgeSoak(slices, SLICE);
    expect(verdict.lastOverFirst).toBeLessThan(0.95);
    expect(verdict.trend).toBeGreaterThan(0.95);
    expect(verdict.holds).toBe(true);
  });

  it('judges throughput against a new process when there is one: the host drifted, the process did not', () => {
    // The GET soak of 2026-11-25, evening: 5,009–8,442 req/s in no order, the fitted line 0.90×,
    // on a host whose speed drifts over minutes. The control puts a new process beside it.
    const rps = [
      5711, 7159, 7014, 5468, 6904, 8442, 5745, 5299, 6351, 6362, 6709, 6660, 7068, 6460, 5838, 6418, 5667, 6096, 6558,
      5009,
    ];
    const slices = rps.map((r) => ({ rps: r, rss: [220] }));
    expect(judgeSoak(slices, SLICE).trend).toBeLessThan(0.95);
    expect(judgeSoak(slices, SLICE).holds).toBe(false);
    const verdict = judgeSoak(slices, SLICE, { soaked: [5900, 6100, 6000], fresh: [6050, 5950, 6080] });
    expect(verdict.againstFresh).toBeCloseTo(18_000 / 18_080, 5);
    expect(verdict.holds).toBe(true);
  });

  it('decays when the soaked process is slower than a new one, though its line held', () => {
    // A host that sped up through the soak hides a process that slowed down: the control does not.
    const slices = sawtooth(10, 224, 108, 20, 0).map((s, i) => ({ ...s, rps: 6000 + i * 20 }));
    expect(judgeSoak(slices, SLICE).holds).toBe(true);
    const verdict = judgeSoak(slices, SLICE, { soaked: [5000, 5100, 4900], fresh: [6300, 6200, 6400] });
    expect(verdict.againstFresh).toBeLessThan(0.95);
    expect(verdict.holds).toBe(false);
  });

  it('gives no verdict of holding without a control measured', () => {
    const verdict = judgeSoak(sawtooth(10, 224, 108, 20, 0), SLICE, { soaked: [], fresh: [] });
    expect(verdict.holds).toBe(false);
  });

  it('gives no verdict of holding without samples', () => {
    const verdict = judgeSoak(
      [
        { rps: 1000, rss: [] },
        { rps: 1000, rss: [] },
      ],
      SLICE,
    );
    expect(verdict.holds).toBe(false);
  });

  it('fits a straight line exactly', () => {
    expect(fittedTrend([100, 90, 80, 70, 60])).toBeCloseTo(0.6, 10);
    expect(fittedTrend([5, 5, 5])).toBe(1);
  });
});

describe('sampling while a run lasts', () => {
  it('samples at its period and once at the end, then stops', async () => {
    vi.useFakeTimers();
    try {
      let n = 0;
      const running = sampledWhile(
        () => new Promise<string>((resolve) => setTimeout(() => resolve('done'), 5_500)),
        () => ++n,
        1000,
      );
      await vi.advanceTimersByTimeAsync(5_500);
      const [result, samples] = await running;
      expect(result).toBe('done');
      expect(samples).toEqual([1, 2, 3, 4, 5, 6]); // five seconds, and the end
      await vi.advanceTimersByTimeAsync(5_000);
      expect(n).toBe(6);
    } finally {
      vi.useRealTimers();
    }
  });
});
