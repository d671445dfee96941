// The one place where errors become HTTP (STYLE principle 5): thrown errors, validation
// failures, unknown routes (404) and known routes asked with another method (405 + Allow).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { parse as parseQuery } from 'node:querystring';
import { requestPath, requestQuery, withoutQuery } from '../request-url.js';
import { routeOptionsOf } from '../request-context.js';
import type { Method, RouteTable } from '../route-table.js';
import { lingerOnClose } from '../lingering-close.js';
import { INTERNAL_ERROR_DETAIL } from './problem-types.js';
import { plain, toProblem, type Problem, type ProblemContext } from './to-problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How this route reports errors; typed when unset. */
    problemForm?: import('./to-problem.js').ProblemForm;
    /** false keeps a catch-all route (CORS's OPTIONS) out of the table behind 405's Allow. */
    routeTable?: false;
  }
}

export function problemContext(request: FastifyRequest, errorTypeBase: string): ProblemContext {
  return {
    form: routeOptionsOf(request).config.problemForm ?? 'typed',
    instance: requestPath(request),
    errorTypeBase,
    requestId: request.id,
    rawValues: (part) => (part === 'params' ? rawParams(request) : rawQuery(request)),
    request: {
      safe: request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS',
      keyed: request.headers['idempotency-key'] !== undefined,
    },
  };
}

/** Path parameters as sent (decoded, not coerced): the route's pattern laid over the path. */
function rawParams(request: FastifyRequest): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  const pattern = (routeOptionsOf(request).url ?? '').split('/');
  const actual = withoutQuery(request.url).split('/');
  pattern.forEach((segment, i) => {
    if (!segment.startsWith(':') || actual[i] === undefined) return;
    try {
      out[segment.slice(1)] = decodeURIComponent(actual[i]);
    } catch {
      out[segment.slice(1)] = actual[i];
    }
  });
  return out;
}

/** Query values as sent (the first, when a name repeats). */
function rawQuery(request: FastifyRequest): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(parseQuery(requestQuery(request))))
    out[name] = Array.isArray(value) ? value[0] : value;
  return out;
}

/** The last resort: a problem document with nothing from the error in it. */
function fallbackProblem(request: FastifyRequest): Problem {
  const instance = withoutQuery(request.url);
  return {
    status: 500,
    body: {
      type: 'about:blank',
      title: 'Internal Server Error',
      status: 500,
      detail: INTERNAL_ERROR_DETAIL,
      instance,
      requestId: request.id,
    },
  };
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  if (problem.headers) reply.headers(problem.headers);
  // The status line says what the title says: RFC 9110's name, where Node's table still has
  // RFC 7231's ("Payload Too Large").
  if (problem.status === 413) reply.raw.statusMessage = 'Content Too Large';
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

  // Nothing may reach Fastify's own handler (its body is not a problem document and carries
  // the exception's message): if rendering or logging the error fails, a fixed problem goes out.
  app.setErrorHandler((error, request, reply) => {
    let problem: Problem;
    try {
      problem = toProblem(error, problemContext(request, errorTypeBase));
    } catch {
      problem = { ...fallbackProblem(request), unexpected: true };
    }
    try {
      if (problem.unexpected) request.log.error({ err: error }, 'unhandled error');
      else if (problem.status >= 500) request.log.warn({ err: error }, 'service unavailable');
    } catch {
      request.log.error('unhandled error (it could not be rendered or logged)');
    }
    // Refused before its body has all come: the client is still sending (lingering-close.ts).
    // (Read from the problem, not the error: an error whose every property throws reaches here too.)
    if (problem.status === 413) lingerOnClose(request.raw.socket);
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
