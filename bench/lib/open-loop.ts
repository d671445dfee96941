// An open-loop load generator (bench --overload): requests are sent on a schedule, whatever the
// server answers, over up to `connections` keep-alive connections, and each one's latency is
// counted from the moment it was due, not from when a connection was free to send it. A closed
// loop (wrk) slows down with the server and never offers more than it serves; this does not.
// A request not answered within `timeoutMs` of its due time is abandoned, as a client with that
// time-out would (its connection is closed, and another opened in its place).
//
// It writes each request's bytes on a raw socket and reads only the status line and
// Content-Length of each answer: node:http's client cost ~100 µs a request here, which made the
// generator, not the server, the bottleneck at a few thousand requests a second.
import { connect, type Socket } from 'node:net';

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
  /** Each admitted answer's due time (ms from the schedule's start), in the order of `admitted` (the native generator's). */
  admittedDue?: number[];
  refused: number[];
  /** Per second of the run: answers 2xx, 503s. */
  perSecond: { ok: number; refused: number }[];
}

interface Pending {
  due: number;
  bytes: Buffer;
  done: boolean;
  connection: Connection | undefined;
}

interface Connection {
  socket: Socket;
  ready: boolean;
  current: Pending | undefined;
  buffer: Buffer;
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
  const { port, rate, seconds, plan } = options;
  const timeoutMs = options.timeoutMs ?? 2000;
  const goodMs = options.goodMs ?? 500;
  const maxConnections = options.connections ?? 1000;
  const headerText = headerLines(options.headers);
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
  const start = performance.now();
  let begin = start;
  const all: Pending[] = [];
  const queue: Pending[] = [];
  let queueHead = 0;
  const idle: Connection[] = [];
  const connections = new Set<Connection>();
  let settled = 0;
  let sweepHead = 0;

  return new Promise<OpenLoopResult>((resolve) => {
    const finish = (): void => {
      clearInterval(sweeper);
      for (const c of connections) c.socket.destroy();
      resolve(result);
    };
    const settle = (): void => {
      settled++;
      if (settled === total) finish();
    };

    const answered = (pending: Pending, status: number): void => {
      if (pending.done) return;
      pending.done = true;
      const latency = performance.now() - pending.due;
      // Past the time-out a client has given up, even when the sweeper (every 20 ms, later on a
      // busy core) has not yet said so: an answer that late is a time-out, not an admitted one.
      if (latency >= timeoutMs) {
        result.timeouts++;
        settle();
        return;
      }
      result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
      const second = result.perSecond[Math.min(result.perSecond.length - 1, Math.floor((pending.due - begin) / 1000))];
      if (status === 503) {
        result.refused.push(latency);
        if (second !== undefined) second.refused++;
      } else {
        result.admitted.push(latency);
        if (status < 300 && second !== undefined) second.ok++;
      }
      if (status < 300 && latency <= goodMs) result.good++;
      settle();
    };

    const dispatch = (): void => {
      while (queueHead < queue.length) {
        const pending = queue[queueHead] as Pending;
        if (pending.done) {
          queueHead++;
          continue;
        }
        // The one idle longest first, as open-loop.c does: the whole pool turns over, and none
        // idles past the server's keep-alive time-out.
        const c = idle.shift();
        if (c === undefined) return;
        queueHead++;
        c.current = pending;
        pending.connection = c;
        c.socket.write(pending.bytes);
      }
    };

    const openConnection = (): void => {
      const socket = connect(port, '127.0.0.1');
      socket.setNoDelay(true);
      const c: Connection = { socket, ready: false, current: undefined, buffer: Buffer.alloc(0) };
      connections.add(c);
      socket.on('connect', () => {
        c.ready = true;
        idle.push(c);
        dispatch();
      });
      socket.on('data', (chunk: Buffer) => {
        c.buffer = c.buffer.length === 0 ? chunk : Buffer.concat([c.buffer, chunk]);
        const answer = parseAnswer(c.buffer);
        if (answer === undefined) return;
        c.buffer = c.buffer.subarray(answer.length);
        const pending = c.current;
        c.current = undefined;
        if (pending !== undefined) answered(pending, answer.status);
        idle.push(c);
        dispatch();
      });
      const lost = (): void => {
        connections.delete(c);
        // Another in its place, as a client pool keeps its size.
        if (settled < total) openConnection();
        const i = idle.indexOf(c);
        if (i !== -1) idle.splice(i, 1);
        const pending = c.current;
        c.current = undefined;
        if (pending !== undefined && !pending.done) {
          pending.done = true;
          result.errors++;
          settle();
        }
        dispatch();
      };
      socket.on('error', () => {});
      socket.on('close', lost);
    };

    // Sends what is due, and abandons what is not answered in time (the oldest are first).
    let next = 0;
    const sweeper = setInterval(() => {
      const now = performance.now();
      for (; sweepHead < all.length; sweepHead++) {
        const pending = all[sweepHead] as Pending;
        if (!pending.done) {
          if (now - pending.due < timeoutMs) break;
          pending.done = true;
          result.timeouts++;
          // A client that gives up closes its connection.
          if (pending.connection !== undefined) {
            pending.connection.current = undefined;
            pending.connection.socket.destroy();
          }
          settle();
        }
      }
    }, 20);
    const pump = (): void => {
      const now = performance.now();
      while (next < total && begin + next * interval <= now) {
        const bytes = Buffer.from(requestText(plan(next), headerText));
        const pending: Pending = { due: begin + next * interval, bytes, done: false, connection: undefined };
        all.push(pending);
        queue.push(pending);
        next++;
      }
      dispatch();
      if (next < total) setTimeout(pump, 1);
    };
    // The connections open first, then the schedule starts.
    for (let i = 0; i < maxConnections; i++) openConnection();
    const waitForConnections = (): void => {
      if (idle.length >= maxConnections || performance.now() - start > 5000) {
        begin = performance.now();
        pump();
      } else setTimeout(waitForConnections, 5);
    };
    waitForConnections();
  });
}

/** Header lines (`name: value\r\n` each) for every request of a run. */
export function headerLines(headers: Record<string, string>): string {
  return Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
}

/** A planned request as HTTP/1.1 text, with `headerText` (headerLines) and its JSON body if any. */
export function requestText({ method, path, body }: Planned, headerText: string): string {
  return (
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headerText}` +
    (body === undefined
      ? '\r\n'
      : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  );
}

/**
 * The first answer complete in `buffer`: its status, its head and the bytes it took (head and
 * Content-Length body); undefined if not all of it has arrived.
 */
export function parseAnswer(buffer: Buffer): { status: number; head: string; length: number } | undefined {
  const end = buffer.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const head = buffer.toString('latin1', 0, end);
  const match = /\r\ncontent-length: *(\d+)/i.exec(head);
  const length = end + 4 + (match === null ? 0 : Number(match[1]));
  return buffer.length >= length ? { status: Number(head.slice(9, 12)), head, length } : undefined;
}

/** The `p`-th percentile of `values` (0–100), or NaN for none. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
