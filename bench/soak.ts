// The soak's verdict (npm run bench -- --soak): does throughput hold, and does memory?
//
// Throughput is judged by the least-squares line through every slice's req/s: on a machine whose
// slices scatter by ±15%, two minutes alone can differ by that much while nothing decays; the
// line cannot. Memory is judged from RSS sampled every second, the last minute's samples against
// the first minute's. A garbage-collected heap is a sawtooth (the mixed load's swings between
// ~225 and ~330 MiB every minute): one sample a slice falls wherever the saw happens to be, so
// two such samples can differ by 40% while nothing grows. The median of a minute's samples sits
// at the saw's middle whatever the phase, and a leak lifts the whole saw, so the median with it.
//
// The fitted line still moves with the host: on a VM whose speed drifts over minutes, a server
// that does not decay can end a soak 10% slower than it began (run of 2026-11-25, evening:
// 0.90×, the server's CPU per request scattered 117–185 µs across slices in no order). So when
// the soak ends, a new process of the same build, warmed up, is measured beside the soaked one,
// in interleaved pairs of slices: the host's drift falls on both, and what is left is the
// process's own. A process that decays is slower than a new one; one that does not, is not.
// That comparison judges throughput when it was made; the fitted line when it was not.

export interface Slice {
  /** Requests a second over the slice. */
  rps: number;
  /** The server's RSS in MiB, sampled once a second during the slice. */
  rss: number[];
}

/** The soaked process and a new one, measured in interleaved pairs after the soak (req/s). */
export interface FreshControl {
  soaked: number[];
  fresh: number[];
}

export interface SoakVerdict {
  /** The last minute's mean req/s over the first minute's (the literal figure). */
  lastOverFirst: number;
  /** Where the fitted line through every slice's req/s ends, over where it starts. */
  trend: number;
  /** The last minute's RSS over the first minute's: the median (judged), the lows and the highs. */
  rss: { median: number; low: number; high: number };
  /** The soaked process's req/s over the new process's, in the control after the soak. */
  againstFresh: number | undefined;
  holds: boolean;
}

/** The lines: throughput at least this (against a new process, else the fitted trend), the median RSS at most this. */
export const SOAK_LINES = { throughput: 0.95, rss: 1.2 } as const;

const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

/** End over start of the least-squares line through ys (taken at equal steps). */
export function fittedTrend(ys: number[]): number {
  const n = ys.length;
  const mt = (n - 1) / 2;
  const my = mean(ys);
  const slope = ys.reduce((a, y, i) => a + (i - mt) * (y - my), 0) / ys.reduce((a, _y, i) => a + (i - mt) ** 2, 0);
  return (my + slope * (n - 1 - mt)) / (my - slope * mt);
}

/**
 * The verdict over slices of `sliceSeconds` each (a minute is the first (last) 60 s of slices),
 * and the comparison with a new process when one was made.
 */
export function judgeSoak(slices: Slice[], sliceSeconds: number, control?: FreshControl): SoakVerdict {
  const perMinute = Math.max(1, Math.round(60 / sliceSeconds));
  const first = slices.slice(0, perMinute);
  const last = slices.slice(-perMinute);
  const firstRss = first.flatMap((s) => s.rss);
  const lastRss = last.flatMap((s) => s.rss);
  const rps = slices.map((s) => s.rps);
  const trend = fittedTrend(rps);
  const rss = {
    median: median(lastRss) / median(firstRss),
    low: Math.min(...lastRss) / Math.min(...firstRss),
    high: Math.max(...lastRss) / Math.max(...firstRss),
  };
  const againstFresh = control === undefined ? undefined : mean(control.soaked) / mean(control.fresh);
  return {
    lastOverFirst: mean(last.map((s) => s.rps)) / mean(first.map((s) => s.rps)),
    trend,
    rss,
    againstFresh,
    // NaN (a slice with no sample, a control with none) fails every comparison: no verdict of
    // "holds" without data.
    holds: (againstFresh ?? trend) >= SOAK_LINES.throughput && rss.median <= SOAK_LINES.rss,
  };
}

/** Calls `sample` every `everyMs` while `run` runs, and once more when it ends. */
export async function sampledWhile<T>(
  run: () => Promise<T>,
  sample: () => number,
  everyMs = 1000,
): Promise<[T, number[]]> {
  const samples: number[] = [];
  const timer = setInterval(() => samples.push(sample()), everyMs);
  try {
    return [await run(), samples];
  } finally {
    clearInterval(timer);
    samples.push(sample());
  }
}
