// Requests that never become a Fastify request (Node's HTTP parser refused them, or their
// headers took too long) still get a problem document, written straight to the socket: never
// Fastify's own JSON body, which is not one (docs/api-guide.md#limits-and-time-outs).
import type { Socket } from 'node:net';
import { STATUS_TITLES } from './problems/problem-types.js';

const DETAILS: Record<number, string> = {
  400: 'The request could not be parsed as HTTP.',
  408: 'The request was not received in time.',
  413: 'The request is larger than this service accepts.',
  431: 'The request headers are too large.',
};

function statusOf(code: string | undefined): number {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return 431;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 408;
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return 413;
    default:
      return 400;
  }
}

export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const status = statusOf(error.code);
  const title = STATUS_TITLES[status] ?? 'Bad Request';
  const body = JSON.stringify({ type: 'about:blank', title, status, detail: DETAILS[status] });
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** A path to show as `instance` when the URL itself is malformed: printable ASCII, the rest percent-encoded. */
export function safePath(url: string): string {
  const path = url.split('?')[0] ?? '/';
  return path.replace(/[^\x21-\x7e]/gu, (c) =>
    [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  );
}
