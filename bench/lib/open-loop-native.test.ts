// The overload bench's native generator (open-loop.c, run by open-loop-native.ts) against local
// servers whose answers are known: its own cases (the schedule at 1,000 a second, time-outs that
// close a connection, answers split across reads, what counts as good), beside the open-loop
// properties that open-loop.test.ts pins for it and openLoop() alike, since the figures of bench
// --overload come from it wherever a C compiler is. On a machine without one these tests are
// skipped (the bench runs openLoop() there).
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnswerServer, type AnswerServer } from './answer-server.js';
import { nativeBinary, openLoopNative } from './open-loop-native.js';

const native = nativeBinary() !== undefined;

let server: AnswerServer;
beforeAll(async () => (server = await startAnswerServer()));
afterAll(() => server.close());

describe.runIf(native)('openLoopNative', () => {
  it('sends plan(i mod distinct): a few request texts round-robin', async () => {
    server.bodies.length = 0;
    const result = await openLoopNative({
      port: server.port,
      rate: 200,
      seconds: 0.2,
      connections: 4,
      headers: {},
      distinct: 4,
      plan: (i) => ({ method: 'POST', path: '/orders', body: String(i % 4) }),
    });
    expect(result.offered).toBe(40);
    expect(Object.fromEntries(result.statuses)).toEqual({ 201: 40 });
    expect(server.bodies.filter((b) => b === '3')).toHaveLength(10);
  });

  it('keeps the schedule: the offered count, at the rate, each request counted once', async () => {
    server.arrivals.length = 0;
    const started = performance.now();
    const result = await openLoopNative({
      port: server.port,
      rate: 1000,
      seconds: 1,
      connections: 50,
      headers: {},
      plan: () => ({ method: 'GET', path: '/ok' }),
    });
    const elapsed = performance.now() - started;
    expect(result.offered).toBe(1000);
    expect(result.generator?.sent).toBe(1000);
    expect(Object.fromEntries(result.statuses)).toEqual({ 200: 1000 });
    expect(result.perSecond.map((s) => s.ok)).toEqual([1000, 0]);
    // The 1,000 requests reach the server over one second, about 100 in each tenth of it, not
    // in a burst (the generator's turn is ≤ 1 ms; a busy test machine delays it by more).
    expect(server.arrivals).toHaveLength(1000);
    const first = server.arrivals[0] ?? 0;
    const span = (server.arrivals.at(-1) ?? 0) - first;
    expect(span).toBeGreaterThan(900);
    expect(span).toBeLessThan(1400);
    const tenths = Array.from({ length: 10 }, (_, k) =>
      server.arrivals.filter((t) => Math.floor((t - first) / 100) === k),
    );
    for (const tenth of tenths) expect(tenth.length).toBeGreaterThan(25);
    expect(elapsed).toBeLessThan(1000 + 1500);
  });

  it('abandons a request unanswered at the time-out, closes its connection and opens another', async () => {
    // A server that reads requests and never answers, recording each connection's first
    // request and its close.
    const sockets: { opened: number; request?: number; closed?: number }[] = [];
    const silent: TcpServer = createTcpServer((socket) => {
      const record: { opened: number; request?: number; closed?: number } = { opened: performance.now() };
      sockets.push(record);
      socket.on('data', () => (record.request ??= performance.now()));
      socket.on('close', () => (record.closed = performance.now()));
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const started = performance.now();
      const result = await openLoopNative({
        port: (silent.address() as AddressInfo).port,
        rate: 20,
        seconds: 0.5,
        connections: 4,
        timeoutMs: 300,
        headers: {},
        plan: () => ({ method: 'GET', path: '/' }),
      });
      const elapsed = performance.now() - started;
      expect(result.offered).toBe(10);
      expect(result.timeouts).toBe(10);
      expect(result.errors).toBe(0);
      expect(result.statuses.size).toBe(0);
      expect(result.admitted).toHaveLength(0);
      // The last is due at 450 ms and abandoned 300 ms later; nothing waits longer.
      expect(elapsed).toBeGreaterThan(700);
      expect(elapsed).toBeLessThan(700 + 1500);
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Each connection that carried a request was closed by the client 300 ms after the
      // request reached it (it was sent when due, or later when it waited for a connection).
      const carried = sockets.filter((s) => s.request !== undefined);
      expect(carried.length).toBeGreaterThanOrEqual(5);
      for (const s of carried) {
        expect(s.closed).toBeDefined();
        expect((s.closed ?? 0) - (s.request ?? 0)).toBeLessThan(300 + 150);
      }
      // The first four were sent when due: closed at their time-out, not before.
      for (const s of carried.slice(0, 4)) expect((s.closed ?? 0) - (s.request ?? 0)).toBeGreaterThan(300 - 50);
      // In place of each closed connection another was opened while requests remained.
      expect(sockets.length).toBeGreaterThan(4);
      expect(result.generator?.connectionsOpened).toBe(sockets.length);
    } finally {
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('reads an answer by its status line and Content-Length, whatever their case and however it is split', async () => {
    // Each answer in three writes 5 ms apart (the head cut in two, then the body), its length
    // header in capitals: the connection is reused for the next request once the body is in.
    const pieces = ['HTTP/1.1 200 OK\r\nX-A: content-length: 9\r\nCONTENT-LENGTH:', '  5\r\n\r\n', 'hello'];
    let opened = 0;
    const raw: TcpServer = createTcpServer((socket) => {
      opened++;
      let seen = '';
      socket.on('data', (chunk: Buffer) => {
        seen += chunk.toString('latin1');
        for (let end = seen.indexOf('\r\n\r\n'); end !== -1; end = seen.indexOf('\r\n\r\n')) {
          seen = seen.slice(end + 4);
          pieces.forEach((piece, k) => setTimeout(() => socket.write(piece), 5 * k));
        }
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    try {
      const result = await openLoopNative({
        port: (raw.address() as AddressInfo).port,
        rate: 100,
        seconds: 0.3,
        connections: 3,
        headers: {},
        plan: () => ({ method: 'GET', path: '/' }),
      });
      expect(Object.fromEntries(result.statuses)).toEqual({ 200: 30 });
      expect(result.timeouts + result.errors).toBe(0);
      expect(Math.min(...result.admitted)).toBeGreaterThanOrEqual(10 - 1);
      expect(opened).toBe(3);
    } finally {
      await new Promise((resolve) => raw.close(resolve));
    }
  });

  it('counts 503s as refused, with their latency, and never as good', async () => {
    const result = await openLoopNative({
      port: server.port,
      rate: 100,
      seconds: 0.3,
      connections: 10,
      headers: {},
      plan: () => ({ method: 'GET', path: '/refuse-late' }),
    });
    expect(Object.fromEntries(result.statuses)).toEqual({ 503: 30 });
    expect(result.refused).toHaveLength(30);
    expect(result.admitted).toHaveLength(0);
    expect(result.good).toBe(0);
    expect(Math.min(...result.refused)).toBeGreaterThanOrEqual(50 - 1);
    expect(result.perSecond[0]).toEqual({ ok: 0, refused: 30 });
  });

  it('counts as good only 2xx answered within goodMs of the due time', async () => {
    // Alternately at once and after 300 ms, with goodMs 150: only the first half are good.
    const result = await openLoopNative({
      port: server.port,
      rate: 100,
      seconds: 0.4,
      connections: 20,
      goodMs: 150,
      headers: {},
      distinct: 2,
      plan: (i) => ({ method: 'GET', path: i % 2 === 0 ? '/ok' : '/after/300' }),
    });
    expect(Object.fromEntries(result.statuses)).toEqual({ 200: 40 });
    expect(result.good).toBe(20);
    expect(result.admitted.filter((ms) => ms >= 300 - 1)).toHaveLength(20);
  });
});

describe.runIf(native)('nativeBinary', () => {
  it('is undefined without a C compiler, so that openLoop() runs instead', () => {
    const cache = mkdtempSync(join(tmpdir(), 'open-loop-native-'));
    try {
      expect(nativeBinary(['no-such-cc-here'], cache)).toBeUndefined();
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
