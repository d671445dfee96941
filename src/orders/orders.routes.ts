// The order routes v1 and v2 share (docs/api-guide.md#orders): everything but creation, whose
// request differs by version. Each version's plugin sets its own problem form around them.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ifMatchOf, versioned } from '../http/etag.js';
import { listCursors, paged } from '../http/paging/pagination.js';
import { EmptyBodySchema, IdParamSchema, NoContentSchema, problemResponses } from '../http/schemas.js';
import type { OrderAction } from './order-status.js';
import {
  CancellationSchema,
  OrderDetailSchema,
  OrderItemsSchema,
  OrderListQuerySchema,
  OrderPageSchema,
  UpdateOrderSchema,
} from './orders.schemas.js';
import * as orders from './orders.service.js';

export const read = { scope: 'orders:read' };
export const write = { scope: 'orders:write' };

/** Registers list, read, change, delete, the action sub-resources and items under `tags`. */
export function orderRoutes(tags: string[]): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get('/', {
      config: read,
      schema: {
        tags,
        summary: 'List orders (only the caller’s, without admin)',
        querystring: OrderListQuerySchema,
        response: { 200: OrderPageSchema, ...problemResponses(400, 401, 403) },
      },
      handler: async (request, reply) => {
        const cursors = await listCursors(request, 'orders');
        return paged(
          request,
          reply,
          await orders.listOrders(request.db, request.principal, request.query, cursors.seek),
          cursors,
        );
      },
    });

    app.get('/:id', {
      config: read,
      schema: {
        tags,
        summary: 'Get an order (ETag from its version; If-None-Match → 304)',
        params: IdParamSchema,
        response: { 200: OrderDetailSchema, 304: NoContentSchema, ...problemResponses(400, 401, 403, 404) },
      },
      handler: async (request, reply) =>
        versioned(
          request,
          reply,
          await orders.getOrder(request.db, request.principal, request.params.id, () => request.raw.socket.destroyed),
        ),
    });

    app.patch('/:id', {
      config: write,
      schema: {
        tags,
        summary: 'Change the note or shipping address (while PENDING or CONFIRMED)',
        params: IdParamSchema,
        body: UpdateOrderSchema,
        response: { 200: OrderDetailSchema, ...problemResponses(400, 401, 403, 404, 409, 412, 415) },
      },
      handler: async (request, reply) =>
        versioned(
          request,
          reply,
          await orders.updateOrder(request.db, request.principal, request.params.id, request.body, ifMatchOf(request)),
        ),
    });

    app.delete('/:id', {
      config: write,
      schema: {
        tags,
        summary: 'Delete an order (idempotent; releases unshipped stock)',
        params: IdParamSchema,
        response: { 204: NoContentSchema, ...problemResponses(400, 401, 403, 412) },
      },
      handler: async (request, reply) => {
        await orders.deleteOrder(request.db, request.principal, request.params.id, ifMatchOf(request));
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
        response: { 200: OrderDetailSchema, ...problemResponses(400, 401, 403, 404, 409, 412, 415) },
      },
      handler: async (request, reply) =>
        versioned(
          request,
          reply,
          await orders.applyAction(request.db, request.principal, request.params.id, 'cancel', {
            reason: request.body.reason,
            ifMatch: ifMatchOf(request),
          }),
        ),
    });

    // Actions without a payload: an empty body, or none, is fine (docs/api-guide.md#orders).
    const actions: [string, OrderAction, string][] = [
      ['confirmation', 'confirm', 'Confirm the order (PENDING → CONFIRMED)'],
      ['shipment', 'ship', 'Ship the order (CONFIRMED → SHIPPED; its units leave reserved stock)'],
      ['delivery', 'deliver', 'Record delivery (SHIPPED → DELIVERED)'],
    ];
    for (const [noun, action, summary] of actions) {
      app.post(`/:id/${noun}`, {
        // The merchant's actions are refused without admin before anything runs.
        config: orders.MERCHANT_ONLY[action] === undefined ? write : { ...write, admin: orders.MERCHANT_ONLY[action] },
        schema: {
          tags,
          summary,
          params: IdParamSchema,
          body: EmptyBodySchema,
          response: { 200: OrderDetailSchema, ...problemResponses(400, 401, 403, 404, 409, 412, 415) },
        },
        handler: async (request, reply) =>
          versioned(
            request,
            reply,
            await orders.applyAction(request.db, request.principal, request.params.id, action, {
              ifMatch: ifMatchOf(request),
            }),
          ),
      });
    }

    app.get('/:id/items', {
      config: read,
      schema: {
        tags,
        summary: 'The order’s items',
        params: IdParamSchema,
        response: { 200: OrderItemsSchema, ...problemResponses(400, 401, 403, 404) },
      },
      handler: async (request) => orders.getOrderItems(request.db, request.principal, request.params.id),
    });
  };
}
