// /api/v2/orders (docs/api-guide.md#versions): placing an order with a customer and a list of items, and the
// shared order routes. Every error in the typed form. Same service and repository as v1.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { etagFor } from '../http/etag.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { problemResponses } from '../http/schemas.js';
import { orderRoutes, write } from './orders.routes.js';
import { CreateOrderV2Schema, OrderDetailSchema } from './orders.schemas.js';
import * as orders from './orders.service.js';

const tags = ['orders (v2)'];

const ordersV2: FastifyPluginAsyncTypebox = async (app) => {
  // docs/api-guide.md#errors: orders are personal data; no cache may keep them.
  routeDefaults(app, { problemForm: 'typed', cacheControl: 'no-store', version: 2 });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Place an order of one or more items (reserves stock)',
      body: CreateOrderV2Schema,
      response: { 201: OrderDetailSchema, ...problemResponses(400, 401, 403, 415, 422) },
    },
    // Before an Idempotency-Key's replay: a token that could not place this order gets its 403.
    preHandler: async (request) => orders.assertMayOrderFor(request.principal, request.body.customerId),
    handler: async (request, reply) => {
      const { customerId, items } = request.body;
      const order = await orders.placeOrder(request.db, request.principal, {
        customerId,
        items: items.map(({ productId, quantity }) => ({ productId, quantity })),
        gone: () => request.raw.socket.destroyed,
      });
      return reply
        .code(201)
        .header('location', createdLocation(request, order.id))
        .header('etag', etagFor(order.version))
        .send(order);
    },
  });

  await app.register(orderRoutes(tags));
};

export default ordersV2;
