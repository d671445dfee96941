// Table of contents of /api/v2 (STYLE principle 8): the spec's second variants (docs/api-guide.md#versions).
import type { FastifyPluginAsync } from 'fastify';
import ordersV2 from '../orders/orders.v2.routes.js';
import usersV2 from '../users/users.v2.routes.js';

const v2: FastifyPluginAsync = async (app) => {
  await app.register(usersV2, { prefix: '/users' });
  await app.register(ordersV2, { prefix: '/orders' });
};

export default v2;
