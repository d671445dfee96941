// /api/v2/orders (DESIGN §6): v1's routes, created with a customer and a list of items, and
// every error in the typed form. Same service and repository as v1.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { paged } from '../http/pagination.js';
import { createdLocation } from '../http/request-url.js';
import { IdParamSchema, NoContentSchema, problemResponses } from '../http/schemas.js';
import type { OrderAction } from './order-status.js';
import {
  CancellationSchema,
  CreateOrderV2Schema,
  OrderDetailV1Schema,
  OrderItemsV1Schema,
  OrderListQuerySchema,
  OrderPageV1Schema,
  UpdateOrderSchema,
} from './orders.schemas.js';
import * as orders from './orders.service.js';

const tags = ['orders (v2)'];
const read = { scope: 'orders:read' };
const write = { scope: 'orders:write' };

const ordersV2: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;
  const { trustProxy } = app.config;

  app.addHook('onRoute', (route) => {
    route.config = { problemForm: 'typed', produces: ['application/json'], ...route.config };
  });
  // DESIGN §7: orders are personal data; no cache may keep them.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });

  app.get('/', {
    config: read,
    schema: { tags, summary: 'List orders (only the caller’s, without admin)', querystring: OrderListQuerySchema, response: { 200: OrderPageV1Schema, ...problemResponses(400, 401, 403) } },
    handler: async (request, reply) => paged(request, reply, trustProxy, await orders.listOrders(db, request.principal, request.query)),
  });

  app.get('/:id', {
    config: read,
    schema: { tags, summary: 'Get an order', params: IdParamSchema, response: { 200: OrderDetailV1Schema, ...problemResponses(400, 401, 403, 404) } },
    handler: async (request) => orders.getOrder(db, request.principal, request.params.id),
  });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Place an order of one or more items (reserves stock)',
      body: CreateOrderV2Schema,
      response: { 201: OrderDetailV1Schema, ...problemResponses(400, 401, 403, 415, 422) },
    },
    handler: async (request, reply) => {
      const { customerId, items } = request.body;
      const order = await orders.placeOrder(db, request.principal, { customerId, items: items.map(({ productId, quantity }) => ({ productId, quantity })) });
      return reply.code(201).header('location', createdLocation(request, trustProxy, order.id)).send(order);
    },
  });

  app.patch('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Change the note or shipping address (while PENDING or CONFIRMED)',
      params: IdParamSchema,
      body: UpdateOrderSchema,
      response: { 200: OrderDetailV1Schema, ...problemResponses(400, 401, 403, 404, 409, 415) },
    },
    handler: async (request) => orders.updateOrder(db, request.principal, request.params.id, request.body),
  });

  app.delete('/:id', {
    config: write,
    schema: { tags, summary: 'Delete an order (idempotent; releases unshipped stock)', params: IdParamSchema, response: { 204: NoContentSchema, ...problemResponses(400, 401, 403) } },
    handler: async (request, reply) => {
      await orders.deleteOrder(db, request.principal, request.params.id);
      return reply.code(204).send(undefined);
    },
  });

  app.post('/:id/cancellation', {
    config: write,
    schema: {
      tags,
      summary: 'Cancel the order (from PENDING or CONFIRMED; releases its stock)',
      params: IdParamSchema,
      body: CancellationSchema,
      response: { 200: OrderDetailV1Schema, ...problemResponses(400, 401, 403, 404, 409, 415) },
    },
    handler: async (request) => orders.applyAction(db, request.principal, request.params.id, 'cancel', request.body.reason),
  });

  // Actions without a payload: an empty body, or none, is fine (DESIGN §5).
  const EmptyBody = Type.Object({}, { description: 'No members are read; the body may be empty.' });
  const actions: [string, OrderAction, string][] = [
    ['confirmation', 'confirm', 'Confirm the order (PENDING → CONFIRMED)'],
    ['shipment', 'ship', 'Ship the order (CONFIRMED → SHIPPED; its units leave reserved stock)'],
    ['delivery', 'deliver', 'Record delivery (SHIPPED → DELIVERED)'],
  ];
  for (const [noun, action, summary] of actions) {
    app.post(`/:id/${noun}`, {
      config: write,
      schema: { tags, summary, params: IdParamSchema, body: EmptyBody, response: { 200: OrderDetailV1Schema, ...problemResponses(400, 401, 403, 404, 409, 415) } },
      handler: async (request) => orders.applyAction(db, request.principal, request.params.id, action),
    });
  }

  app.get('/:id/items', {
    config: read,
    schema: { tags, summary: 'The order’s items', params: IdParamSchema, response: { 200: OrderItemsV1Schema, ...problemResponses(400, 401, 403, 404) } },
    handler: async (request) => orders.getOrderItems(db, request.principal, request.params.id),
  });
};

export default ordersV2;
