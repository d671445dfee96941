// The one place where errors become HTTP (STYLE principle 5): thrown errors, validation
// failures, unknown routes (404) and known routes asked with another method (405 + Allow).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { requestPath } from '../request-url.js';
import type { Method, RouteTable } from '../route-table.js';
import { plain, toProblem, type Problem, type ProblemContext } from './to-problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How this route reports errors (spec 7.3); typed when unset. */
    problemForm?: import('./to-problem.js').ProblemForm;
    /** false keeps a catch-all route (CORS's OPTIONS) out of the table behind 405's Allow. */
    routeTable?: false;
  }
}

export function problemContext(request: FastifyRequest, errorTypeBase: string): ProblemContext {
  return {
    form: request.routeOptions.config?.problemForm ?? 'typed',
    instance: requestPath(request),
    errorTypeBase,
    requestId: String(request.id),
  };
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  if (problem.headers) reply.headers(problem.headers);
  // The problem is written as is: a route's success schema must not filter its members.
  return reply
    .code(problem.status)
    .type('application/problem+json')
    .serializer((body: unknown) => JSON.stringify(body))
    .send(problem.body);
}

async function problems(app: FastifyInstance, { routes }: { routes: RouteTable }): Promise<void> {
  const errorTypeBase = app.config.errorTypeBase;
  // Every route, as it is added, goes into the table that answers 405's Allow.
  app.addHook('onRoute', (route) => {
    if (route.config?.routeTable !== false) routes.add(route.method, route.url);
  });

  app.setErrorHandler((error, request, reply) => {
    const problem = toProblem(error, problemContext(request, errorTypeBase));
    if (problem.unexpected) request.log.error({ err: error }, 'unhandled error');
    else if (problem.status >= 500) request.log.warn({ err: error }, 'service unavailable');
    return sendProblem(reply, problem);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = requestPath(request);
    const allowed = routes.allowed(path);
    // A route that exists for this method but found nothing (callNotFound) is a 404, not a 405.
    if (allowed.length > 0 && !allowed.includes(request.method as Method)) {
      return sendProblem(
        reply.header('allow', allowed.join(', ')),
        plain(405, `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}.`, { instance: path }),
      );
    }
    return sendProblem(reply, plain(404, `No resource exists at ${path}.`, { instance: path }));
  });
}

export default fp(problems, { name: 'problems', dependencies: ['request-context'] });
