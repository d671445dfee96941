// /api/public/**: no authentication.
import type { FastifyPluginAsync } from 'fastify';
import health from './health.routes.js';
import asyncapiRoutes from './asyncapi.routes.js';
import openapiRoutes from './openapi.routes.js';
import problemPages from './problems.routes.js';
import { passwordResetCompletion, passwordResetPage } from '../users/index.js';

const publicRoutes: FastifyPluginAsync = async (app) => {
  app.addHook('onRoute', (route) => {
    route.config = { produces: ['application/json'], ...route.config };
  });
  await app.register(health, { prefix: '/health' });
  await app.register(openapiRoutes);
  await app.register(asyncapiRoutes);
  await app.register(problemPages, { prefix: '/problems' });
  await app.register(passwordResetCompletion);
  await app.register(passwordResetPage);
};

export default publicRoutes;
