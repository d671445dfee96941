// A request refused before its body has all come (413: over the limit) is answered and its
// connection closed, Fastify says. Closed at once, the socket still holds unread bytes of the
// body and more are on their way: the kernel answers them with a reset, which can reach the
// client before it has read the answer (it sees EPIPE or ECONNRESET, never the 413). Servers that
// refuse early close lingering (nginx's lingering_close): the answer, then the end of their
// side, then they read and discard what still comes, for a bounded time and amount, and close
// when the client does.
import type { Socket } from 'node:net';

/** How long, and how much, a refused body is read and discarded after the answer. */
export const LINGER = { ms: 5000, bytes: 16 * 1024 * 1024, checkEveryMs: 100 };

/**
 * Makes `socket`'s close, once its answer is written, a lingering one. Node's HTTP server ends
 * a connection marked `Connection: close` with `socket.destroySoon()` once the response has
 * finished: on this socket that call ends our side (the answer goes out, then FIN), keeps
 * reading (the HTTP parser discards the rest of the body), and destroys the socket when the
 * client closes its side, after `LINGER.ms`, or once `LINGER.bytes` more have come.
 */
export function lingerOnClose(socket: Socket, limits = LINGER): void {
  socket.destroySoon = function lingeringClose(this: Socket): void {
    if (this.destroyed) return;
    this.end();
    const started = this.bytesRead;
    const deadline = performance.now() + limits.ms;
    const check = setInterval(() => {
      if (performance.now() >= deadline || this.bytesRead - started > limits.bytes) this.destroy();
    }, limits.checkEveryMs);
    check.unref();
    this.once('close', () => clearInterval(check));
    // The client read the answer and closed: so do we (the server allows half-open sockets).
    this.once('end', () => this.destroy());
  };
}
