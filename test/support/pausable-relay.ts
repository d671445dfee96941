// A TCP relay on loopback between the service and PostgreSQL that can stop answering, as a frozen
// database machine or a path whose sockets never close does: `pause()` stops forwarding bytes
// either way on every connection, keeps every socket open, and accepts new connections without
// forwarding them; `resume()` forwards the connections accepted from then on, while those from
// before stay silent forever. Nothing is closed or reset but by `drop()` and `close()`.
import { connect, createServer, type Socket } from 'node:net';
import { closeFront, listening } from './tcp-front.js';

export interface PausableRelay {
  /** `target` with the relay's address. */
  readonly url: string;
  pause(): void;
  resume(): void;
  /** Ends every connection it holds, both sides (as a server restart does); new ones go through. */
  drop(): void;
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

export async function pausableRelay(target: string): Promise<PausableRelay> {
  const upstreamUrl = new URL(target);
  const sockets = new Set<Socket>();
  /** The relay's generation: a connection forwards only while the relay is still in its own. */
  let generation = 0;
  let paused = false;
  let accepted = 0;
  const server = createServer((client) => {
    accepted++;
    const born = generation;
    const live = () => !paused && generation === born;
    if (paused) {
      // Accepted and held open, never forwarded: bytes sent to it go nowhere.
      sockets.add(client);
      client.on('error', () => {});
      client.on('close', () => sockets.delete(client));
      client.resume();
      return;
    }
    const upstream = connect(Number(upstreamUrl.port), upstreamUrl.hostname.replace(/^\[|\]$/g, ''));
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    // A server that ends a silenced connection is not heard of either: its client stays open.
    upstream.on('close', () => {
      if (live()) client.destroy();
    });
    client.on('close', () => upstream.destroy());
    client.on('data', (chunk: Buffer) => {
      if (live()) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (live()) client.write(chunk);
    });
  });
  return {
    url: await listening(server, upstreamUrl),
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      generation++;
    },
    drop: () => {
      for (const socket of sockets) socket.destroy();
    },
    accepted: () => accepted,
    close: () => closeFront(server, sockets),
  };
}
