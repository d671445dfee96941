// The overload bench's instruments, the open-loop generators: openLoop() (open-loop.ts, in this
// process) and the native one (open-loop.c, run by open-loop-native.ts, which the bench uses
// wherever a C compiler is). What they count is what the overload figures in
// docs/benchmark-log.md rest on, so their open-loop property is pinned here, for both, against a
// local server whose answers are known: latency counted from each request's due time (not from
// when a connection was free), requests offered on schedule whatever the server does, abandoned
// at the client time-out, and every offered request accounted for once. The native generator's
// own cases are in open-loop-native.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOLD_MS, startAnswerServer, type AnswerServer } from './answer-server.js';
import {
  nativeBinary,
  openLoopNative,
  type NativeOpenLoopOptions,
  type NativeOpenLoopResult,
} from './open-loop-native.js';
import { openLoop, percentile } from './open-loop.js';

let server: AnswerServer;
beforeAll(async () => (server = await startAnswerServer()));
afterAll(() => server.close());

type Generator = (options: NativeOpenLoopOptions) => Promise<NativeOpenLoopResult>;

const generators: { name: string; run: Generator; present: boolean }[] = [
  { name: 'openLoop', run: openLoop, present: true },
  // (Skipped on a machine without a C compiler, where the bench runs openLoop() instead.)
  { name: 'openLoopNative', run: openLoopNative, present: nativeBinary() !== undefined },
];

describe.each(generators)('$name', ({ name, run, present }) => {
  it.runIf(present)('counts each answer by status, 503s apart, and sends each body', async () => {
    server.bodies.length = 0;
    const result = await run({
      port: server.port,
      rate: 200,
      seconds: 0.5,
      connections: 10,
      headers: { authorization: 'Bearer t' },
      distinct: 100,
      plan: (i) =>
        i % 3 === 0
          ? { method: 'GET', path: '/refuse' }
          : i % 3 === 1
            ? { method: 'POST', path: '/orders', body: JSON.stringify({ n: i }) }
            : { method: 'GET', path: '/large' },
    });
    expect(result.offered).toBe(100);
    expect(Object.fromEntries(result.statuses)).toEqual({ 503: 34, 201: 33, 200: 33 });
    expect(result.refused).toHaveLength(34);
    expect(result.admitted).toHaveLength(66);
    expect(result.good).toBe(66);
    expect(result.timeouts + result.errors).toBe(0);
    expect(server.bodies.map((b) => (JSON.parse(b) as { n: number }).n).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 33 }, (_, k) => 3 * k + 1),
    );
    const perSecond = result.perSecond.reduce((t, s) => ({ ok: t.ok + s.ok, refused: t.refused + s.refused }));
    expect(perSecond).toEqual({ ok: 66, refused: 34 });
    // The native generator's own count: the ten connections, none opened again.
    if (name === 'openLoopNative') expect(result.generator?.connectionsOpened).toBe(10);
  });

  it.runIf(present)(
    'offers on schedule past what the server serves, counts latency from the due time, and abandons at the time-out',
    async () => {
      // 40 requests due over one second, 25 ms apart; two connections serve one every 50 ms. A
      // closed loop would read HOLD_MS for each answer; the k-th is due at 25k ms and answered near
      // 100 + 50k, so the queue's wait shows in its latency, and the later ones pass the time-out.
      const started = performance.now();
      const result = await run({
        port: server.port,
        rate: 40,
        seconds: 1,
        connections: 2,
        timeoutMs: 700,
        goodMs: 250,
        headers: {},
        plan: () => ({ method: 'GET', path: '/slow' }),
      });
      const elapsed = performance.now() - started;
      expect(result.offered).toBe(40);
      // Every offered request accounted for once: answered, timed out, or lost with its connection.
      const answered = [...result.statuses.values()].reduce((a, b) => a + b, 0);
      expect(answered + result.timeouts + result.errors).toBe(40);
      expect(result.admitted).toHaveLength(answered);
      // No answer is faster than the server holds it, and the queue's wait is counted: the k-th
      // answered waited for the k answers before it, two at a time.
      expect(Math.min(...result.admitted)).toBeGreaterThanOrEqual(HOLD_MS - 1);
      expect([...result.admitted].sort((a, b) => a - b)[6]).toBeGreaterThan(2 * HOLD_MS);
      expect(Math.max(...result.admitted)).toBeGreaterThan(3 * HOLD_MS);
      // Only the first few are answered within 250 ms of being due (k ≤ 6 at the server's pace).
      expect(result.good).toBeGreaterThanOrEqual(1);
      expect(result.good).toBeLessThanOrEqual(12);
      // The rest of the schedule is not stretched to the server's pace: the later requests time out
      // at 700 ms past their due time, so the run ends near 1 s + 700 ms, not at 40 × 50 ms.
      expect(result.timeouts).toBeGreaterThanOrEqual(5);
      expect(elapsed).toBeLessThan(1000 + 700 + 1000);
      // An answer that comes later than the time-out is one (a client has given up by then).
      expect(Math.max(...result.admitted)).toBeLessThan(700);
      expect(percentile(result.admitted, 99)).toBeLessThan(700);
      // The native generator says how late it wrote: the wait for a free connection.
      if (name === 'openLoopNative') expect(result.generator?.sendLagMax).toBeGreaterThan(3 * HOLD_MS);
    },
  );
});

describe('percentile', () => {
  it('reads the p-th percentile of unsorted values, NaN for none', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(values, 50)).toBe(51);
    expect(percentile(values, 99)).toBe(100);
    expect(percentile(values, 0)).toBe(1);
    expect(percentile([], 99)).toBeNaN();
  });
});
