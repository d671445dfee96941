// A local HTTP server whose answers are known, for the tests of the open-loop generators
// (open-loop.test.ts, open-loop-native.test.ts): what each path answers, and when.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How long `/slow` holds each answer (ms): two connections serve 20 a second. */
export const HOLD_MS = 100;

export interface AnswerServer {
  port: number;
  /** The bodies of the POSTs, in order. */
  bodies: string[];
  /** When each request reached the server (performance.now()), in order. */
  arrivals: number[];
  close: () => Promise<void>;
}

/**
 * `/slow`: 200 after HOLD_MS; `/after/N`: 200 after N ms; `/refuse`: 503 at once; `/refuse-late`:
 * 503 after 50 ms; `/large`: 200 with a 200,000-byte body (many reads); a POST: 201 echoing its
 * body; anything else: 200, empty.
 */
export async function startAnswerServer(): Promise<AnswerServer> {
  const bodies: string[] = [];
  const arrivals: number[] = [];
  const handle = (request: IncomingMessage, response: ServerResponse): void => {
    arrivals.push(performance.now());
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const url = request.url ?? '';
      const wait = /^\/after\/(\d+)$/.exec(url);
      if (url === '/slow') {
        setTimeout(() => response.writeHead(200, { 'content-length': '2' }).end('ok'), HOLD_MS);
      } else if (wait !== null) {
        setTimeout(() => response.writeHead(200, { 'content-length': '0' }).end(), Number(wait[1]));
      } else if (url === '/refuse') {
        response.writeHead(503, { 'content-length': '4', 'retry-after': '1' }).end('busy');
      } else if (url === '/refuse-late') {
        setTimeout(() => response.writeHead(503, { 'content-length': '4' }).end('busy'), 50);
      } else if (url === '/large') {
        response.writeHead(200, { 'content-length': String(200_000) }).end('x'.repeat(200_000));
      } else if (request.method === 'POST') {
        bodies.push(body);
        response.writeHead(201, { 'content-length': String(Buffer.byteLength(body)) }).end(body);
      } else {
        response.writeHead(200, { 'content-length': '0' }).end();
      }
    });
  };
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    bodies,
    arrivals,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
