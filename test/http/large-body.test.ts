// A body over the limit is refused with 413 before it has all come: the client, still sending,
// must read that answer, not a reset (docs/api-guide.md#limits-and-time-outs). The service goes
// on reading and discarding the rest for a bounded time and amount, as nginx's lingering close
// does, then closes. Over a real socket: the connection's life is the point.
import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { LINGER } from '../../src/http/lingering-close.js';
import { ADMIN } from '../support/tokens.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const address = new URL(await app.listen({ port: 0, host: '127.0.0.1' }));
afterAll(() => app.close());

/**
 * As a simple client does: sends the whole body of `size` bytes (`chunk` bytes every `everyMs`),
 * reading nothing meanwhile, then reads the answer. Resolves with what it read, how much it sent,
 * and the first socket error.
 */
function sendThenRead(
  size: number,
  { chunk = 64 * 1024, everyMs = 2, chunked = false } = {},
): Promise<{ answer: string; sent: number; error: string | undefined; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(Number(address.port), address.hostname);
    socket.pause();
    let answer = '';
    let sent = 0;
    let error: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    socket.on('data', (data: Buffer) => (answer += data.toString('latin1')));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      error ??= e.code;
      socket.resume();
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ answer, sent, error, ms: performance.now() - started });
    });
    socket.on('connect', () => {
      socket.write(
        `POST /api/v1/orders HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${ADMIN}\r\n` +
          `Content-Type: application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${size}`}\r\n\r\n`,
      );
      const piece = Buffer.alloc(chunk, 0x20);
      timer = setInterval(() => {
        if (socket.destroyed) return clearInterval(timer);
        if (sent >= size) {
          clearInterval(timer);
          if (chunked) socket.write('0\r\n\r\n');
          socket.resume();
          return;
        }
        const n = Math.min(chunk, size - sent);
        sent += n;
        const body = piece.subarray(0, n);
        socket.write(chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), body, Buffer.from('\r\n')]) : body);
      }, everyMs);
    });
  });
}

describe('a body over the limit, still being sent', () => {
  it.each([
    ['declared by Content-Length', false],
    ['chunked', true],
  ])('is answered 413, and the client that reads only once it has sent it all reads it (%s)', async (_, chunked) => {
    const { answer, error, sent } = await sendThenRead(2 * 1024 * 1024, { chunked });
    expect(answer, `nothing read; the connection ended with ${error}`).toMatch(/^HTTP\/1\.1 413 Content Too Large\r\n/);
    expect(answer).toContain('"status":413');
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(sent).toBe(2 * 1024 * 1024);
    expect(error).toBeUndefined();
  });

  it('is read and discarded so far and no further: a client that sends far more is cut off after LINGER.bytes', async () => {
    const size = LINGER.bytes * 3;

    const { sent, error } = await sendThenRead(size, { chunk: 256 * 1024, everyMs: 1 });

    // Discarded up to LINGER.bytes (a close without lingering cuts the client off within the
    // first megabyte, at the socket buffers' size), then cut off.
    expect(sent).toBeGreaterThan(LINGER.bytes);
    expect(error).toBeDefined();
    expect(sent).toBeLessThan(size);
  });
});
