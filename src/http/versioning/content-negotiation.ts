// Request and response media types: JSON bodies only (415 otherwise; docs/api-guide.md#errors), an empty
// body read as no body, merge-patch for PATCH, and 406 for an Accept the route cannot meet.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import Negotiator from 'negotiator';
import {
  BodyTooDeep,
  MAX_BODY_DEPTH,
  UnstorableInput,
  mayHoldUnstorable,
  nestsDeeperThan,
  unstorableFields,
} from '../body-guard.js';
import { keepBodyForFingerprint } from '../idempotency/idempotency.js';
import { plain } from '../problems/to-problem.js';
import { sendProblem } from '../problems/error-handler.js';
import { requestPath } from '../request-url.js';
import { routeOptionsOf } from '../request-context.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Media types this route answers with; Accept is checked against them. */
    produces?: readonly string[];
  }
}

/**
 * Media-range parameters other than q (such as charset) are dropped before matching: our
 * types carry none, and a client asking for "application/json; charset=utf-8" means JSON.
 */
function withoutParameters(accept: string): string {
  return accept
    .split(',')
    .map((range) => {
      const [type = '', ...params] = range.split(';');
      const q = params.find((p) => /^\s*q\s*=/i.test(p));
      return q === undefined ? type.trim() : `${type.trim()};${q.trim()}`;
    })
    .join(', ');
}

async function contentNegotiation(app: FastifyInstance): Promise<void> {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  // JSON, JSON merge patch, and the vendor media types (application/vnd.<vendor>.v<N>+json).
  const vendorJson = new RegExp(`^application/vnd\\.${app.config.apiVendor.replace(/[.]/g, '\\.')}\\.v\\d+\\+json$`);
  const parse: Parameters<typeof app.addContentTypeParser<string>>[2] = (request, body, done) => {
    keepBodyForFingerprint(request, body);
    // An empty body is no body: the route's validation then names the missing fields.
    if (body.trim() === '') return done(null, undefined);
    // docs/api-guide.md#limits-and-time-outs: too deep is refused before parsing; what cannot be stored, right after.
    if (nestsDeeperThan(body, MAX_BODY_DEPTH)) return done(new BodyTooDeep(), undefined);
    void parseJson(request, body, (error, value) => {
      if (error !== null) return done(error, undefined);
      if (mayHoldUnstorable(body)) {
        const fieldErrors = unstorableFields(value);
        if (fieldErrors.length > 0) return done(new UnstorableInput(fieldErrors), undefined);
      }
      done(null, value);
    });
  };
  app.addContentTypeParser(['application/json', 'application/merge-patch+json'], { parseAs: 'string' }, parse);
  app.addContentTypeParser(vendorJson, { parseAs: 'string' }, parse);

  // A route that validates a body sees {} for a missing one, so every required field is
  // reported, instead of one message about the body as a whole.
  app.addHook('preValidation', (request, _reply, done) => {
    if ((request.body === undefined || request.body === null) && routeOptionsOf(request).schema?.body !== undefined)
      request.body = {};
    done();
  });

  app.addHook('onRequest', (request, reply, done) => {
    const produces = routeOptionsOf(request).config.produces;
    const accept = request.headers.accept;
    if (produces === undefined || accept === undefined || accept === '*/*') return done();
    if (accept === 'application/json' && produces[0] === 'application/json') return done();
    if (new Negotiator({ headers: { accept: withoutParameters(accept) } }).mediaType(produces) !== undefined)
      return done();
    sendProblem(
      reply,
      plain(406, `This resource is available as ${produces.join(', ')}.`, { instance: requestPath(request) }),
    );
  });
}

export default fp(contentNegotiation, { name: 'content-negotiation', dependencies: ['problems'] });
