// A closed loop of clients (bench --crowds, and the overload tests): each client sends its next
// request as soon as it has an answer, with no think time and Retry-After ignored, as a batch
// job's workers, a burst of users or a load balancer's pool of busy keep-alive connections do.
// Each answer's latency is counted from when its request was sent. A request not answered within
// `timeoutMs` is abandoned as a client with that time-out would: its connection is closed and
// another opened in its place.
//
// Requests are written on raw keep-alive sockets and only the status line and Content-Length of
// each answer are read (node:http's client would cost more than some of the requests it sends).
import { connect, type Socket } from 'node:net';
import { headerLines, parseAnswer, requestText, type Planned } from './open-loop.js';

export interface ClosedLoopResult {
  seconds: number;
  /** Answers by status. */
  statuses: Map<number, number>;
  answered: number;
  /** Answered 2xx within `goodMs`. */
  good: number;
  timeouts: number;
  errors: number;
  /** Latencies (ms) of the answers that were not 503, and of the 503s. */
  admitted: number[];
  refused: number[];
}

export async function closedLoop(options: {
  port: number;
  clients: number;
  seconds: number;
  plan: (i: number) => Planned;
  headers: Record<string, string>;
  timeoutMs?: number;
  goodMs?: number;
}): Promise<ClosedLoopResult> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const goodMs = options.goodMs ?? 500;
  const head = headerLines(options.headers);
  const result: ClosedLoopResult = {
    seconds: options.seconds,
    statuses: new Map(),
    answered: 0,
    good: 0,
    timeouts: 0,
    errors: 0,
    admitted: [],
    refused: [],
  };
  let n = 0;
  const started = performance.now();
  const until = started + options.seconds * 1000;

  interface Client {
    socket: Socket;
    sentAt: number;
    buffer: Buffer;
  }
  const clients = new Set<Client>();
  let open = 0;
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => (resolveDone = resolve));

  const start = (): void => {
    open++;
    const socket = connect(options.port, '127.0.0.1');
    socket.setNoDelay(true);
    const client: Client = { socket, sentAt: -1, buffer: Buffer.alloc(0) };
    clients.add(client);
    const send = (): void => {
      if (performance.now() >= until) {
        client.sentAt = -1;
        socket.end();
        return;
      }
      client.sentAt = performance.now();
      socket.write(requestText(options.plan(n++), head));
    };
    socket.on('connect', send);
    socket.on('data', (chunk: Buffer) => {
      client.buffer = client.buffer.length === 0 ? chunk : Buffer.concat([client.buffer, chunk]);
      for (;;) {
        const answer = parseAnswer(client.buffer);
        if (answer === undefined) return;
        client.buffer = client.buffer.subarray(answer.length);
        if (client.sentAt < 0) continue;
        const latency = performance.now() - client.sentAt;
        client.sentAt = -1;
        const { status, head: text } = answer;
        result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
        result.answered++;
        if (status === 503) result.refused.push(latency);
        else result.admitted.push(latency);
        if (status < 300 && latency <= goodMs) result.good++;
        // An answer that closes its connection: the client opens another.
        if (/\r\nconnection: *close/i.test(text)) {
          socket.destroy();
          return;
        }
        send();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clients.delete(client);
      open--;
      if (client.sentAt >= 0) result.errors++;
      if (performance.now() < until) start();
      else if (open === 0) resolveDone();
    });
  };

  const sweeper = setInterval(() => {
    const now = performance.now();
    for (const client of clients) {
      if (client.sentAt >= 0 && now - client.sentAt >= timeoutMs) {
        result.timeouts++;
        client.sentAt = -1;
        client.socket.destroy();
      }
    }
  }, 20);
  for (let i = 0; i < options.clients; i++) start();
  await done;
  clearInterval(sweeper);
  return result;
}
