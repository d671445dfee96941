// Table of contents of /api/v1 (STYLE principle 8).
import type { FastifyPluginAsync } from 'fastify';
import ordersV1 from '../orders/orders.v1.routes.js';
import usersV1 from '../users/users.v1.routes.js';
import webhookRoutes from '../webhooks/webhooks.routes.js';
import eventRoutes from '../events/events.routes.js';

const v1: FastifyPluginAsync = async (app) => {
  await app.register(usersV1, { prefix: '/users' });
  await app.register(ordersV1, { prefix: '/orders' });
  await app.register(webhookRoutes, { prefix: '/webhook-subscriptions' });
  await app.register(eventRoutes, { prefix: '/events' });
};

export default v1;
