// What every route of a resource plugin shares: its problem form, the media types it answers
// with (application/json, and for a versioned resource its vendor type), and (for
// personal data, docs/api-guide.md#errors) Cache-Control: no-store. One call per plugin.
import type { FastifyInstance } from 'fastify';
import type { ProblemForm } from './problems/to-problem.js';
import { vendorMediaType } from './versioning/versioning.js';

export function routeDefaults(
  app: FastifyInstance,
  defaults: { problemForm: ProblemForm; cacheControl?: string; version?: number },
): void {
  const produces =
    defaults.version === undefined
      ? ['application/json']
      : ['application/json', vendorMediaType(app.config.apiVendor, defaults.version)];
  app.addHook('onRoute', (route) => {
    route.config = { problemForm: defaults.problemForm, produces, ...route.config };
  });
  const { cacheControl } = defaults;
  if (cacheControl !== undefined) {
    app.addHook('onRequest', (_request, reply, done) => {
      reply.header('cache-control', cacheControl);
      done();
    });
  }
}
