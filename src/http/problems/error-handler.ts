// The one place where errors become HTTP (STYLE principle 5): thrown errors, validation
// failures, unknown routes (404) and known routes asked with another method (405 + Allow).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay, { type HTTPVersion } from 'find-my-way';
import { requestPath } from '../request-url.js';
import { plain, toProblem, type Problem, type ProblemContext } from './to-problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How this route reports errors (spec 7.3); typed when unset. */
    problemForm?: import('./to-problem.js').ProblemForm;
  }
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

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

async function problems(app: FastifyInstance): Promise<void> {
  const errorTypeBase = app.config.errorTypeBase;
  // A second router, fed every route, answers "which methods does this path have?" for 405.
  const known = FindMyWay<HTTPVersion.V1>({ ignoreTrailingSlash: false });
  const noop = () => {};
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (!(METHODS as readonly string[]).includes(method)) continue;
      if (!known.hasRoute(method as 'GET', route.url)) known.on(method as 'GET', route.url, noop);
    }
  });

  app.setErrorHandler((error, request, reply) => {
    const problem = toProblem(error, problemContext(request, errorTypeBase));
    if (problem.unexpected) request.log.error({ err: error }, 'unhandled error');
    else if (problem.status >= 500) request.log.warn({ err: error }, 'service unavailable');
    return sendProblem(reply, problem);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = requestPath(request);
    const allowed = METHODS.filter((m) => known.find(m, path) !== null);
    // A route that exists for this method but found nothing (callNotFound) is a 404, not a 405.
    if (allowed.length > 0 && !allowed.includes(request.method as (typeof METHODS)[number])) {
      return sendProblem(
        reply.header('allow', allowed.join(', ')),
        plain(405, `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}.`, { instance: path }),
      );
    }
    return sendProblem(reply, plain(404, `No resource exists at ${path}.`, { instance: path }));
  });
}

export default fp(problems, { name: 'problems', dependencies: ['request-context'] });
