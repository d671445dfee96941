// /api/stock/{productId} (docs/api-guide.md#products-and-stock): always revalidated (no-cache).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { routeDefaults } from '../http/route-defaults.js';
import { problemResponses } from '../http/schemas.js';
import { ProductIdParamSchema, SetStockSchema, StockSchema } from './products.schemas.js';
import * as stock from './stock.service.js';

const tags = ['stock'];

const stockRoutes: FastifyPluginAsyncTypebox = async (app) => {
  // Stock is always revalidated.
  routeDefaults(app, { problemForm: 'typed', cacheControl: 'no-cache' });

  app.get('/:productId', {
    config: { scope: 'products:read' },
    schema: {
      tags,
      summary: 'Get the stock of a product',
      params: ProductIdParamSchema,
      response: { 200: StockSchema, ...problemResponses(400, 401, 403, 404) },
    },
    handler: async (request) =>
      stock.getStock(request.db, request.params.productId, () => request.raw.socket.destroyed),
  });

  app.put('/:productId', {
    config: { scope: 'products:write' },
    schema: {
      tags,
      summary: 'Set the units available',
      params: ProductIdParamSchema,
      body: SetStockSchema,
      response: { 200: StockSchema, ...problemResponses(400, 401, 403, 404, 415) },
    },
    handler: async (request) => stock.setStock(request.db, request.params.productId, request.body.available),
  });
};

export default stockRoutes;
