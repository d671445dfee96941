// An open-loop load generator (bench --overload): requests are sent on a schedule, whatever the
// server answers, over up to `connections` keep-alive connections, and each one's latency is
// counted from the moment it was due, not from when a connection was free to send it. A closed
// loop (wrk) slows down with the server and never offers more than it serves; this does not.
// A request not answered within `timeoutMs` of its due time is abandoned, as a client with that
// time-out would (its connection is closed).
import { Agent, request, type ClientRequest } from 'node:http';

export interface Planned {
  method: string;
  path: string;
  body?: string;
}

export interface OpenLoopResult {
  offered: number;
  seconds: number;
  /** Answered 2xx within `goodMs` of being due. */
  good: number;
  /** Answers by status. */
  statuses: Map<number, number>;
  timeouts: number;
  errors: number;
  /** Latency (ms, from due time) of the answers that were not 503, and of the 503s. */
  admitted: number[];
  refused: number[];
  /** Per second of the run: answers 2xx, 503s. */
  perSecond: { ok: number; refused: number }[];
}

interface Outstanding {
  due: number;
  req: ClientRequest;
  done: boolean;
}

export async function openLoop(options: {
  port: number;
  rate: number;
  seconds: number;
  plan: (i: number) => Planned;
  headers: Record<string, string>;
  connections?: number;
  timeoutMs?: number;
  goodMs?: number;
}): Promise<OpenLoopResult> {
  const { port, rate, seconds, plan, headers } = options;
  const timeoutMs = options.timeoutMs ?? 2000;
  const goodMs = options.goodMs ?? 500;
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections ?? 1000 });
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const result: OpenLoopResult = {
    offered: total,
    seconds,
    good: 0,
    statuses: new Map(),
    timeouts: 0,
    errors: 0,
    admitted: [],
    refused: [],
    perSecond: Array.from({ length: Math.ceil(seconds) + 1 }, () => ({ ok: 0, refused: 0 })),
  };
  const outstanding: Outstanding[] = [];
  let head = 0;
  let settled = 0;
  const start = performance.now();

  return new Promise<OpenLoopResult>((resolve) => {
    const finish = (): void => {
      clearInterval(sweeper);
      agent.destroy();
      resolve(result);
    };
    const settle = (): void => {
      settled++;
      if (settled === total) finish();
    };
    const send = (i: number): void => {
      const due = start + i * interval;
      const { method, path, body } = plan(i);
      const entry: Outstanding = { due, req: undefined as unknown as ClientRequest, done: false };
      const req = request(
        {
          agent,
          host: '127.0.0.1',
          port,
          method,
          path,
          headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (entry.done) return;
            entry.done = true;
            const now = performance.now();
            const latency = now - due;
            const status = res.statusCode ?? 0;
            result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
            const second = result.perSecond[
              Math.min(result.perSecond.length - 1, Math.floor((due - start) / 1000))
            ] as { ok: number; refused: number };
            if (status === 503) {
              result.refused.push(latency);
              second.refused++;
            } else {
              result.admitted.push(latency);
              if (status < 300) second.ok++;
            }
            if (status < 300 && latency <= goodMs) result.good++;
            settle();
          });
        },
      );
      entry.req = req;
      req.on('error', () => {
        if (entry.done) return;
        entry.done = true;
        result.errors++;
        settle();
      });
      outstanding.push(entry);
      req.end(body);
    };
    // Abandons what is not answered in time (the oldest are first), and sends what is due.
    let next = 0;
    const sweeper = setInterval(() => {
      const now = performance.now();
      for (; head < outstanding.length; head++) {
        const entry = outstanding[head] as Outstanding;
        if (!entry.done) {
          if (now - entry.due < timeoutMs) break;
          entry.done = true;
          result.timeouts++;
          entry.req.destroy();
          settle();
        }
        outstanding[head] = undefined as unknown as Outstanding;
      }
    }, 20);
    const pump = (): void => {
      const now = performance.now();
      while (next < total && start + next * interval <= now) send(next++);
      if (next < total) setTimeout(pump, 1);
    };
    pump();
  });
}

/** The `p`-th percentile of `values` (0–100), or NaN for none. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
