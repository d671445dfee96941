import type { FastifyPluginAsync } from 'fastify';
import { OrderDetailSchema } from '../orders/index.js';
import { UserV1Schema } from '../users/index.js';
import { asyncApiDocument } from '../webhooks/webhooks.asyncapi.js';

/** /api/public/asyncapi.json: the AsyncAPI 3.0 document of the events, built once. */
const asyncapiRoutes: FastifyPluginAsync = async (app) => {
  let document: string | undefined;
  app.get(
    '/asyncapi.json',
    { schema: { hide: true }, config: { produces: ['application/json'] } },
    async (_request, reply) => {
      document ??= JSON.stringify(
        asyncApiDocument(app.config.baseUrl, { user: UserV1Schema, order: OrderDetailSchema }),
      );
      return reply.type('application/json').header('cache-control', 'public, max-age=300').send(document);
    },
  );
};

export default asyncapiRoutes;
