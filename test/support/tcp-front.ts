// TCP fronts on loopback between a test's client and the suite's PostgreSQL, to play the network
// or a proxy: connections accepted and dropped, bytes rewritten, the server taken away.
import { connect, type Socket } from 'node:net';

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
