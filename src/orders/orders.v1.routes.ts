// /api/v1/orders (docs/api-guide.md#orders): placing an order of one product for the caller, and
// the shared order routes. Errors in the v1 orders form: validation as "<field>: <message>"
// strings, 404 "Order not found" with orderId.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { etagFor } from '../http/etag.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { problemResponses } from '../http/schemas.js';
import { orderRoutes, write } from './orders.routes.js';
import { CreateOrderV1Schema, OrderDetailSchema } from './orders.schemas.js';
import * as orders from './orders.service.js';

const tags = ['orders (v1)'];

const ordersV1: FastifyPluginAsyncTypebox = async (app) => {
  // docs/api-guide.md#errors: orders are personal data; no cache may keep them.
  routeDefaults(app, { problemForm: 'orders-v1', cacheControl: 'no-store', version: 1 });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Place an order for the caller (reserves stock)',
      body: CreateOrderV1Schema,
      response: { 201: OrderDetailSchema, ...problemResponses(400, 401, 403, 415, 422) },
    },
    handler: async (request, reply) => {
      const { productId, quantity } = request.body;
      const order = await orders.placeOrder(request.db, request.principal, {
        items: [{ productId, quantity }],
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

export default ordersV1;
