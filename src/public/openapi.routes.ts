import type { FastifyPluginAsync } from 'fastify';

/** /api/public/openapi.json: the document, built once when the app is ready. */
const openapiRoutes: FastifyPluginAsync = async (app) => {
  let document: string | undefined;
  app.get(
    '/openapi.json',
    { schema: { hide: true }, config: { produces: ['application/json'] } },
    async (_request, reply) => {
      document ??= JSON.stringify(app.swagger());
      return reply.type('application/json').header('cache-control', 'public, max-age=300').send(document);
    },
  );
};

export default openapiRoutes;
