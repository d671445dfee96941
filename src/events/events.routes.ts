// GET /api/v1/events (docs/webhooks.md): the events the caller may read, as Server-Sent Events. One
// hub per app reads new events for every open stream (events/stream.ts); this file is the HTTP
// side: the query and Last-Event-ID, the response's headers, the client going away, shutdown.
import { PassThrough } from 'node:stream';
import { once } from 'node:events';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { problemResponses } from '../http/schemas.js';
import { routeDefaults } from '../http/route-defaults.js';
import { onWriteResponse } from '../http/write-hooks.js';
import { EVENT_PATTERNS, eventsRecorded, type EventPattern } from './index.js';
import { EventHub, EventStream, streamStart } from './stream.js';
import { Gauge } from 'prom-client';
import { TooManyRequests } from '../errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The process's reader of new events for the open streams. */
    eventHub: EventHub;
    /** How many streams each caller holds open here (EVENT_STREAMS_PER_CALLER). */
    eventStreams: OpenStreams;
  }
}

/** Open streams per caller, bounded: the next one over the bound is a 429. */
export class OpenStreams {
  readonly #open = new Map<string, number>();
  total = 0;

  constructor(private readonly perCaller: number) {}

  /** Counts a stream of `subject`'s; the returned function releases it (once, however often called). */
  acquire(subject: string): () => void {
    const open = this.#open.get(subject) ?? 0;
    if (open >= this.perCaller)
      throw new TooManyRequests(
        this.perCaller,
        RETRY_STREAM_SECONDS,
        `At most ${this.perCaller} event streams may be open per caller. Close one, or retry after ${RETRY_STREAM_SECONDS} seconds.`,
      );
    this.#open.set(subject, open + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.#open.get(subject) ?? 1) - 1;
      if (left === 0) this.#open.delete(subject);
      else this.#open.set(subject, left);
    };
  }
}

const RETRY_STREAM_SECONDS = 5;

export interface EventStreamOptions {
  /** How often new events are read while a stream is open (default 250 ms). */
  pollMs?: number;
  /** How often each stream gets a comment line (default 15 s, docs/webhooks.md). */
  heartbeatMs?: number;
}

const ONE_TYPE = `(${EVENT_PATTERNS.map((p) => p.replace(/[.*]/g, (c) => `\\${c}`)).join('|')})`;

export const EventStreamQuerySchema = Type.Object({
  types: Type.Optional(
    Type.String({
      maxLength: 500,
      pattern: `^${ONE_TYPE}(,${ONE_TYPE})*$`,
      'x-message': `must be a comma-separated list of ${EVENT_PATTERNS.join(', ')}`,
      description: 'Only these event types: exact types, `user.*`, `order.*` or `*`, separated by commas.',
      examples: ['order.*,user.deleted'],
    }),
  ),
});

export const EventStreamHeadersSchema = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      pattern: '^[1-9][0-9]{0,15}$',
      maxLength: 16,
      'x-message': 'must be the id of an event this stream sent',
      description:
        'Resume after this event (the `id` of the last message received; browsers send it when they reconnect).',
    }),
  ),
});

/** The hub, its lifecycle, and a read right after this process writes an event. */
export const eventHub = fp(
  async (app: FastifyInstance, options: EventStreamOptions) => {
    const hub = new EventHub(app.db, {
      source: `${app.config.baseUrl}/api/v1`,
      pollMs: options.pollMs ?? 250,
      heartbeatMs: options.heartbeatMs ?? 15_000,
      onError: (error) => app.log.warn({ err: error }, 'event stream: reading new events failed; retrying'),
    });
    app.decorate('eventHub', hub);
    app.decorate('eventStreams', new OpenStreams(app.config.eventStreamsPerCaller));
    new Gauge({
      name: 'event_streams_open',
      help: 'Event streams open on this instance',
      registers: [app.metrics],
      collect() {
        this.set(app.eventStreams.total);
      },
    });
    // After a request that wrote events has answered (and so committed), read them at once.
    let seen = eventsRecorded();
    onWriteResponse(app, (_request, _reply, done) => {
      const now = eventsRecorded();
      if (now !== seen) {
        seen = now;
        hub.poke();
      }
      done();
    });
    // Streams end before the server waits for its connections to close.
    app.addHook('preClose', (done) => {
      hub.closeAll();
      done();
    });
  },
  { name: 'event-hub' },
);

const eventRoutes: FastifyPluginAsyncTypebox = async (app) => {
  routeDefaults(app, { problemForm: 'typed', cacheControl: 'no-store', version: 1 });

  app.get('/', {
    // The stream reads past what it sent: it must see every commit at once (never a replica).
    config: { scope: ['orders:read', 'users:read'], produces: ['text/event-stream'], primaryOnly: true },
    schema: {
      tags: ['events'],
      summary: 'Stream the events the caller may read (Server-Sent Events)',
      description:
        'Order events need `orders:read`, user events `users:read`; without `admin`, only the caller’s own ' +
        'orders and user. Without `Last-Event-ID` the stream starts with the events committed after it opened; ' +
        'with it, it resumes after that event (within EVENT_RETENTION_DAYS) and skips none, even one committed ' +
        'later with a smaller id. Each message: `id` (the event’s sequence), `event` (its type), `data` (the ' +
        'CloudEvent, as in a webhook delivery). A comment line every 15 s keeps proxies open; the stream ends ' +
        'when the instance shuts down, and the client reconnects with Last-Event-ID.',
      querystring: EventStreamQuerySchema,
      headers: EventStreamHeadersSchema,
      response: {
        200: {
          description: 'The event stream (text/event-stream; never ends on its own)',
          content: {
            'text/event-stream': {
              // No `type: string`: the stream has no length; its messages are described here.
              schema: Type.Unsafe<string>({
                description: 'Messages of `id:`, `event:` and `data:` lines (the CloudEvent JSON), and comments',
                examples: [
                  'id: 42\nevent: order.shipped\ndata: {"specversion":"1.0","id":"…","type":"order.shipped",…}\n\n',
                ],
              }),
            },
          },
        },
        ...problemResponses(400, 401, 403, 406),
      },
    },
    handler: async (request, reply) => {
      const lastEventId = request.headers['last-event-id'];
      const types = request.query.types?.split(',') as EventPattern[] | undefined;
      // Counted from here, and released however the stream ends, even while it opens.
      const release = app.eventStreams.acquire(request.principal.subject);
      const opening = { cut: false };
      reply.raw.once('close', () => {
        opening.cut = true;
        release();
      });
      // Cut before this handler ran (while its token was checked): 'close' has already fired.
      if (request.raw.socket.destroyed || reply.raw.destroyed) {
        release();
        return reply;
      }
      const start = await streamStart(request.db, lastEventId === undefined ? undefined : Number(lastEventId));
      if (opening.cut) return reply;
      const body = new PassThrough();
      const socket = request.raw.socket;
      const stream = new EventStream({ principal: request.principal, types }, start, {
        write: (chunk) => body.write(chunk),
        buffered: () => body.writableLength + socket.writableLength,
        end: () => body.end(),
        drained: async () => {
          if (body.writableNeedDrain) await once(body, 'drain');
        },
      });
      // The client went away (or the stream was closed): leave the hub.
      reply.raw.once('close', () => {
        clearTimeout(expiry);
        stream.close();
        app.eventHub.remove(stream);
      });
      // The stream ends with its token: the client reconnects with a new one and Last-Event-ID.
      const { expiresAt } = request.principal;
      const expiry =
        expiresAt === undefined
          ? undefined
          : setTimeout(
              () => {
                stream.close();
                app.eventHub.remove(stream);
              },
              Math.min(Math.max(0, expiresAt - Date.now()), 2 ** 31 - 1),
            );
      expiry?.unref();
      body.write('retry: 2000\n\n');
      void reply
        .code(200)
        .header('content-type', 'text/event-stream; charset=utf-8')
        .header('x-accel-buffering', 'no')
        .send(body as unknown as string); // a stream; the schema describes what it carries
      app.eventHub.open(stream).catch((error: unknown) => {
        request.log.warn({ err: error }, 'event stream: catching up failed; closing the stream');
        stream.close();
        app.eventHub.remove(stream);
      });
      return reply;
    },
  });
};

export default eventRoutes;
