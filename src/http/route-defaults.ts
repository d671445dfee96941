// What every route of a resource plugin shares: its problem form, the media types it answers
// with, and (for personal data, DESIGN §7) Cache-Control: no-store. One call per plugin.
import type { FastifyInstance } from 'fastify';
import type { ProblemForm } from './problems/to-problem.js';

export function routeDefaults(app: FastifyInstance, defaults: { problemForm: ProblemForm; cacheControl?: string }): void {
  app.addHook('onRoute', (route) => {
    route.config = { problemForm: defaults.problemForm, produces: ['application/json'], ...route.config };
  });
  const { cacheControl } = defaults;
  if (cacheControl !== undefined) {
    app.addHook('onRequest', (_request, reply, done) => {
      reply.header('cache-control', cacheControl);
      done();
    });
  }
}
