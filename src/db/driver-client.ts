// One postgres.js client for one connection's life: the pool (postgres-pool.ts) and the LISTEN
// connection (notifications.ts) create one per connection and throw it away whole when that
// connection dies, so that nothing of a dead connection (a write still buffered, a statement
// awaiting an answer, an error, a timer) can reach the next one.
//
// postgres.js 3.4 reconnects a client by itself, and its reconnection has defects that lose
// statements or hand one statement's answer to another (docs/architecture.md, "How a connection
// lives and dies"). A client made here cannot reconnect: it dials through `socket`, which opens one
// socket and refuses a second; the second call is how the owner learns that the connection is
// over when postgres.js would otherwise start another one. It sends no statement of its own
// (`fetch_types: false`; no `target_session_attrs`, which the owner checks itself), keeps no
// timer of its own life (`max_lifetime: null`), and reports its close through `onclose`.
import { connect, type Socket } from 'node:net';
import postgres, { type Options, type Sql } from 'postgres';
import type { Endpoint } from './connection-target.js';

export type DriverOptions = Options<Record<string, postgres.PostgresType>>;

/** Opens a socket to `endpoint` (tests put a front of their own here). */
export type Dial = (endpoint: Endpoint, timeoutMs: number) => Promise<Socket>;

/** An error with a driver-style code, as postgres.js gives for a connection's failures. */
export function connectionError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

export function connectionLost(): Error {
  return connectionError('CONNECTION_CLOSED', 'The connection to the database closed');
}

/** A TCP connection to `endpoint`, resolved once connected, refused after `timeoutMs`. */
export const dialTcp: Dial = ({ host, port }, timeoutMs) =>
  new Promise<Socket>((resolve, reject) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(connectionError('CONNECT_TIMEOUT', `connecting to ${host}:${port} took over ${timeoutMs} ms`));
    }, timeoutMs);
    const failed = (error: Error): void => {
      clearTimeout(timer);
      reject(error);
    };
    socket.once('error', failed);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', failed);
      // Until postgres.js listens (a turn later), an error must not be thrown as unhandled.
      socket.on('error', () => {});
      // postgres.js names a TLS server by these (servername), as for the sockets it opens itself.
      Object.assign(socket, { host, port });
      resolve(socket);
    });
  });

/**
 * A client of one connection to `endpoint`, opened by its first statement. `onDeath` is called
 * when the connection closes, or when postgres.js tries to open another (its first one failed
 * or closed): the client is then done with, and every statement sent on it settles.
 */
export function singleUseClient(
  driverUrl: string,
  endpoint: Endpoint,
  options: DriverOptions,
  { dial = dialTcp, onDeath }: { dial?: Dial | undefined; onDeath: () => void },
): Sql {
  const connectTimeoutMs = (Number(options.connect_timeout) || 30) * 1000;
  let dialled = false;
  const driverOptions = {
    ...options,
    max: 1,
    fetch_types: false,
    max_lifetime: null,
    target_session_attrs: undefined,
    onclose: () => {
      onDeath();
    },
    socket: () => {
      if (dialled) {
        onDeath();
        return Promise.reject(connectionLost());
      }
      dialled = true;
      return dial(endpoint, connectTimeoutMs);
    },
  };
  return postgres(driverUrl, driverOptions as unknown as DriverOptions);
}
