// A load balancer in miniature for multi-instance tests: each request goes to the next upstream
// in turn, as an HTTP proxy with round-robin balancing sends it. Listens on loopback only.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RoundRobinProxy {
  url: string;
  /** How many requests each upstream received, in upstream order. */
  sent: number[];
  close(): Promise<void>;
}

export async function roundRobinProxy(upstreams: string[]): Promise<RoundRobinProxy> {
  const sent = upstreams.map(() => 0);
  let next = 0;
  const server: Server = createServer((incoming, outgoing) => {
    const index = next++ % upstreams.length;
    sent[index]!++;
    const forwarded = request(
      new URL(incoming.url ?? '/', upstreams[index]),
      { method: incoming.method, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', () => {
      if (!outgoing.headersSent) outgoing.writeHead(502);
      outgoing.end();
    });
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sent,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
