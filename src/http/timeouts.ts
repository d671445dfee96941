// docs/api-guide.md#limits-and-time-outs: a request still running after REQUEST_TIMEOUT_MS is answered 503 with Retry-After.
// (Receiving headers and keep-alive idling are bounded by the HTTP server's own time-outs, set
// in app.ts; runaway SQL by PostgreSQL's statement_timeout.) One sweep on an interval checks
// the requests in flight, so the per-request cost is two links in a list, not a timer.
import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { problemContext, sendProblem } from './problems/error-handler.js';
import { RequestTimedOut } from '../errors.js';
import { toProblem } from './problems/to-problem.js';

const kOlder = Symbol('timeouts.older');
const kNewer = Symbol('timeouts.newer');

declare module 'fastify' {
  interface FastifyReply {
    /** Its neighbours in the list of requests in flight, oldest first (timeouts.ts). */
    [kOlder]: FastifyReply | null;
    [kNewer]: FastifyReply | null;
  }
}

/**
 * The replies in flight, in arrival order, linked through two fields of each reply: adding and
 * removing one is a few assignments (a Set hashed every reply, the largest share of this
 * plugin's cost), and the sweep reads only the oldest ones.
 */
class InFlight {
  #oldest: FastifyReply | null = null;
  #newest: FastifyReply | null = null;

  add(reply: FastifyReply): void {
    reply[kOlder] = this.#newest;
    reply[kNewer] = null;
    if (this.#newest === null) this.#oldest = reply;
    else this.#newest[kNewer] = reply;
    this.#newest = reply;
  }

  delete(reply: FastifyReply): void {
    const older = reply[kOlder];
    const newer = reply[kNewer];
    // Not in the list (never added, or removed already): nothing to unlink.
    if (older === null && newer === null && this.#oldest !== reply) return;
    if (older === null) this.#oldest = newer;
    else older[kNewer] = newer;
    if (newer === null) this.#newest = older;
    else newer[kOlder] = older;
    reply[kOlder] = null;
    reply[kNewer] = null;
  }

  get oldest(): FastifyReply | null {
    return this.#oldest;
  }
}

async function timeouts(app: FastifyInstance): Promise<void> {
  const limit = app.config.timeouts.requestMs;
  // A request's age is Fastify's own (reply.elapsedTime, from the clock it starts for every
  // request), read only by the sweep.
  const inflight = new InFlight();
  app.decorateReply(kOlder, null);
  app.decorateReply(kNewer, null);

  app.addHook('onRequest', (_request, reply, done) => {
    inflight.add(reply);
    done();
  });
  app.addHook('onResponse', (_request, reply, done) => {
    inflight.delete(reply);
    done();
  });
  // A request whose client went away never reaches onResponse: the sweep drops it at its
  // deadline (its socket is destroyed, so nothing is sent).

  const sweep = setInterval(
    () => {
      // Oldest first: the first request younger than the limit ends the sweep. (Arrival at this
      // hook, not the request's start: a request that waited in an earlier hook, for a token's
      // first check or a quota in Redis, can sit behind a younger one and time out that late.)
      for (let reply = inflight.oldest; reply !== null && reply.elapsedTime >= limit; reply = inflight.oldest) {
        inflight.delete(reply);
        if (reply.sent || reply.raw.headersSent || reply.raw.destroyed) continue;
        reply.request.log.warn({ timeoutMs: limit }, 'request timed out');
        sendProblem(reply, toProblem(new RequestTimedOut(), problemContext(reply.request, app.config.errorTypeBase)));
      }
    },
    Math.max(10, Math.min(1000, Math.floor(limit / 4))),
  );
  sweep.unref();
  app.addHook('onClose', (_app, done) => {
    clearInterval(sweep);
    done();
  });
}

export default fp(timeouts, { name: 'timeouts', dependencies: ['problems'] });
