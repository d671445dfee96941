// OpenAPI 3.1, generated from the same TypeBox schemas that validate and serialize.
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

async function openapi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Resource API',
        version: '1.0.0',
        description:
          'Users, orders, products and stock over JSON/HTTP. Every failure is an RFC 9457 problem document (application/problem+json). ' +
          'Every path outside /api/public/ requires a Bearer token.',
      },
      servers: [{ url: app.config.baseUrl }],
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      },
      security: [{ bearerAuth: [] }],
    },
    // Routes registered with hide (the docs page's own assets) stay out of the document.
    hideUntagged: false,
  });
  await app.register(swaggerUi, {
    routePrefix: '/api/public/docs',
    uiConfig: { deepLinking: true },
    staticCSP: true,
  });
}

export default fp(openapi, { name: 'openapi', dependencies: ['problems'] });
