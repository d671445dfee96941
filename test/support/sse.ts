// A Server-Sent Events client over a real socket, for the event stream's tests: it parses the
// text/event-stream format (WHATWG HTML §9.2) as a browser's EventSource would, and keeps
// every message and comment it received.
import { request, type IncomingHttpHeaders } from 'node:http';

export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseConnection {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as received, for answers that are not streams (problem documents). */
  body: () => string;
  messages: SseMessage[];
  comments: number;
  /** The response ended (the server closed the stream). */
  ended: Promise<void>;
  /** Waits until `predicate` holds for the messages received, or fails after `timeoutMs`. */
  until: (predicate: (messages: SseMessage[]) => boolean, timeoutMs?: number) => Promise<SseMessage[]>;
  close: () => void;
}

export function openSse(url: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      let raw = '';
      let buffer = '';
      const messages: SseMessage[] = [];
      const waiters = new Set<() => void>();
      const state = { comments: 0 };
      let id: string | undefined;
      let event = '';
      let data: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        raw += chunk;
        buffer += chunk;
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, newline).replace(/\r$/, '');
          buffer = buffer.slice(newline + 1);
          if (line === '') {
            if (data.length > 0) messages.push({ id, event: event || 'message', data: data.join('\n') });
            event = '';
            data = [];
            continue;
          }
          if (line.startsWith(':')) {
            state.comments++;
            continue;
          }
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') id = value;
          else if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
        for (const wake of waiters) wake();
      });
      const ended = new Promise<void>((done) => {
        res.on('end', done);
        res.on('close', done);
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: () => raw,
        messages,
        get comments() {
          return state.comments;
        },
        ended,
        until: (predicate, timeoutMs = 10_000) =>
          new Promise((done, fail) => {
            if (predicate(messages)) return done(messages);
            const timer = setTimeout(() => {
              waiters.delete(check);
              fail(new Error(`timed out; received ${JSON.stringify(messages.map((m) => [m.id, m.event]))}`));
            }, timeoutMs);
            const check = () => {
              if (!predicate(messages)) return;
              clearTimeout(timer);
              waiters.delete(check);
              done(messages);
            };
            waiters.add(check);
          }),
        close: () => {
          req.destroy();
        },
      });
    });
    req.on('error', reject);
    req.end();
  });
}
