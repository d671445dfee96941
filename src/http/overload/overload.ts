// The Fastify side of overload protection (docs/operations.md#overload): the metrics of the
// adaptive limit, the count of requests shed and one warning while shedding lasts, the
// event-loop backstop (@fastify/under-pressure), and what readiness learns from the requests in
// flight. Admission itself happens before Fastify (admission.ts).
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import underPressure from '@fastify/under-pressure';
import { Counter, Gauge } from 'prom-client';
import { Overloaded } from '../../errors.js';
import { isExempt, type Admission, type ShedReason } from './admission.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Admission to the instance: the adaptive limit and the requests in flight. */
    admission: Admission;
  }
}

/** A request in flight this long means the instance cannot answer in time: readiness says 503. */
export const NOT_READY_AFTER_MS = 2000;
/** How often the event loop's delay is sampled (the backstop). */
const SAMPLE_MS = 100;
/** How often the loop's turns are timed for the backstop: it trips only after three long ones in a row. */
const TURN_CHECK_MS = SAMPLE_MS / 4;
/** Building the app blocks the loop: its samples are not heeded until this long after ready. */
const STARTUP_GRACE_MS = 2000;
/** At most one warning this often while requests are shed. */
const WARN_EVERY_MS = 10_000;

/** The shed requests' counts and warning, told by admission (before Fastify) and by this plugin. */
export class ShedLog {
  readonly counts: Record<ShedReason, number> = { limit: 0, queue: 0, event_loop: 0 };
  #warnedAt = Number.NEGATIVE_INFINITY;
  #sinceWarning = 0;
  log: { warn(fields: object, message: string): void; debug(message: string): void } | undefined;
  limit: () => number = () => 0;

  readonly shed = (reason: ShedReason): void => {
    this.counts[reason]++;
    this.#sinceWarning++;
    const log = this.log;
    if (log === undefined) return;
    log.debug(`request shed: ${reason}`); // a no-op unless LOG_LEVEL is debug
    const now = performance.now();
    if (now - this.#warnedAt < WARN_EVERY_MS) return;
    log.warn(
      { shed: this.#sinceWarning, reason, limit: this.limit() },
      'overloaded: refusing requests with 503 (this warning repeats at most every 10 s while it lasts)',
    );
    this.#warnedAt = now;
    this.#sinceWarning = 0;
  };
}

async function overload(
  app: FastifyInstance,
  { admission, shedLog, eventLoopDelayMs }: { admission: Admission; shedLog: ShedLog; eventLoopDelayMs: number },
) {
  app.decorate('admission', admission);
  shedLog.log = app.log;
  shedLog.limit = () => admission.limiter.limit;

  /** A gauge read when Prometheus scrapes. */
  const collected = (name: string, help: string, read: () => number): void => {
    new Gauge({
      name,
      help,
      registers: [app.metrics],
      collect() {
        this.set(read());
      },
    });
  };
  collected('http_concurrency_limit', 'The adaptive limit on requests in flight', () => admission.limiter.limit);
  // Its bounds (CONCURRENCY_LIMIT_MIN, _MAX), so that a rule can tell a limit pinned at its floor.
  collected(
    'http_concurrency_limit_min',
    'The least the adaptive limit may fall to (CONCURRENCY_LIMIT_MIN)',
    () => admission.limiter.min,
  );
  collected(
    'http_concurrency_limit_max',
    'The most the adaptive limit may grow to (CONCURRENCY_LIMIT_MAX)',
    () => admission.limiter.max,
  );
  collected(
    'http_requests_in_flight',
    'Requests admitted and not yet answered (health probes and event streams apart)',
    () => admission.inflight,
  );
  collected(
    'http_requests_queued',
    'Requests waiting in the admission queue for a place under the concurrency limit',
    () => admission.queue.length,
  );
  // Which regime the queue is in: normal (first in, first out, refused past the budget) or
  // overloaded (newest first, refused after the overloaded wait).
  new Gauge({
    name: 'http_admission_queue_regime',
    help: 'The admission queue regime: 1 for the one it is in (normal, overloaded), 0 for the other',
    labelNames: ['regime'],
    registers: [app.metrics],
    collect() {
      const now = admission.queue.overloaded ? 'overloaded' : 'normal';
      for (const regime of ['normal', 'overloaded'] as const) this.set({ regime }, regime === now ? 1 : 0);
    },
  });
  collected(
    'http_admission_queue_wait_limit_seconds',
    'How long a request may wait in the admission queue now before it is refused',
    () => admission.queue.timeoutMs / 1000,
  );
  const counted: Record<ShedReason, number> = { limit: 0, queue: 0, event_loop: 0 };
  new Counter({
    name: 'http_requests_shed_total',
    help: 'Requests refused with 503 for overload, by reason (limit, queue, event_loop)',
    labelNames: ['reason'],
    registers: [app.metrics],
    collect() {
      for (const reason of ['limit', 'queue', 'event_loop'] as const) {
        this.inc({ reason }, shedLog.counts[reason] - counted[reason]);
        counted[reason] = shedLog.counts[reason];
      }
    },
  });

  // A statement that waited too long for a connection (Overloaded 'queue') is shed too.
  app.addHook('onError', (_request, _reply, error, done) => {
    if (error instanceof Overloaded && error.reason === 'queue') shedLog.shed('queue');
    done();
  });
  app.addHook('onClose', (_app, done) => {
    admission.close();
    done();
  });

  // The backstop is off with protection off or at 0 (the tests' setting: a test process builds
  // several apps, and building one blocks the loop the others are measured on), and on the
  // embedded engine, whose database runs on the event loop itself: its delay there is the
  // database's own work, which the limit already bounds.
  if (!admission.enabled || eventLoopDelayMs === 0 || app.config.database.kind !== 'postgres') return;
  // Building the app blocks the loop for seconds, which under-pressure's first samples count:
  // its verdict is heeded from STARTUP_GRACE_MS after the app is ready.
  let heededFrom = Number.POSITIVE_INFINITY;
  app.addHook('onReady', (done) => {
    heededFrom = performance.now() + STARTUP_GRACE_MS;
    done();
  });
  // The backstop: when the event loop itself lags (its mean delay over 100 ms past
  // EVENT_LOOP_DELAY_LIMIT_MS), new requests are refused the same way until it recovers. The
  // adaptive limit sees only the time from admission to answer; a process whose loop is behind
  // has requests waiting unread in its sockets, and that wait is what this bounds.
  // (Not its utilization: a busy loop near 1.0 is what the adaptive limit is for.)
  // Its verdict is heeded only after three turns of the loop in a row past the threshold (a timer
  // every quarter of a sample, late by that much three times), and then while it lasts.
  // under-pressure reads a sample in which its timer ticked less than twice as an infinite delay:
  // one turn of ~90 ms right after a sample (a collection, the host taking the core) refused the
  // next 100 ms of requests, a steady load served in time among them (64 clients in a closed loop,
  // `npm run bench -- --tracing`); on a loaded 2-core host, a collection and then the host taking
  // the core made two in a row (a steady request refused at a threshold of 25 ms, CI's parallel
  // passes). A loop that is behind is late at every turn.
  let longTurns = 0;
  let lastTurn = performance.now();
  // A turn is long when the timer fired later than asked by the threshold or more: what it waited
  // past its own interval is the loop's delay.
  const turns = setInterval(() => {
    const now = performance.now();
    longTurns = now - lastTurn - TURN_CHECK_MS >= eventLoopDelayMs ? longTurns + 1 : 0;
    lastTurn = now;
  }, TURN_CHECK_MS);
  turns.unref();
  let tripped = false;
  const behind = (): boolean => {
    if (!app.isUnderPressure() || performance.now() < heededFrom) return (tripped = false);
    if (longTurns >= 3) tripped = true;
    return tripped;
  };
  await app.register(underPressure, {
    maxEventLoopDelay: eventLoopDelayMs,
    sampleInterval: SAMPLE_MS,
    pressureHandler: (request, reply) => {
      if (!behind() || isExempt(request.raw.method, request.raw.url ?? '/')) return undefined;
      reply.hijack();
      admission.refuse(request.raw, reply.raw, 'event_loop');
      return new Promise<void>(() => {});
    },
  });
  // Admission asks too, before Fastify: the cheaper place to refuse what the loop is behind on.
  admission.lagging = behind;
  app.addHook('onClose', (_app, done) => {
    clearInterval(turns);
    done();
  });
}

export default fp(overload, { name: 'overload', dependencies: ['metrics'] });
