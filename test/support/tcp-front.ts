// TCP fronts on loopback between a test's client and the suite's PostgreSQL, to play the network
// or a proxy: connections accepted and dropped, bytes rewritten, the server taken away.
import { connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * Opens a connection to `target` (a postgres:// URL) for `client`, tracked in `sockets` (to be
 * destroyed by the test) until it closes, each side closed with the other, errors absorbed.
 * Nothing is piped: the caller decides what flows.
 */
export function upstreamFor(client: Socket, target: URL, sockets: Set<Socket>): Socket {
  const upstream = connect(Number(target.port), target.hostname.replace(/^\[|\]$/g, ''));
  for (const socket of [client, upstream]) {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  }
  upstream.on('close', () => client.destroy());
  client.on('close', () => upstream.destroy());
  return upstream;
}

/** Starts `server` on loopback (`port`, or any) and gives `target` with the front's address. */
export async function listening(server: Server, target: URL, port = 0): Promise<string> {
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const front = new URL(target);
  front.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return front.toString();
}

/** Drops every connection the front holds and stops it; resolves once it has stopped. */
export function closeFront(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const socket of sockets) socket.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}
