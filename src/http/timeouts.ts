// DESIGN §9: a request still running after REQUEST_TIMEOUT_MS is answered 503 with Retry-After.
// (Receiving headers and keep-alive idling are bounded by the HTTP server's own time-outs, set
// in app.ts; runaway SQL by PostgreSQL's statement_timeout.) One sweep on an interval checks
// the requests in flight, so the per-request cost is a Set add and delete, not a timer.
import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { problemContext, sendProblem } from './problems/error-handler.js';
import { RequestTimedOut } from '../errors.js';
import { toProblem } from './problems/to-problem.js';

async function timeouts(app: FastifyInstance): Promise<void> {
  const limit = app.config.timeouts.requestMs;
  // A request's age is Fastify's own (reply.elapsedTime, from the clock it starts for every
  // request), read only by the sweep: nothing is stored on the reply.
  const inflight = new Set<FastifyReply>();

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
      for (const reply of inflight) {
        if (reply.elapsedTime < limit) continue;
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
