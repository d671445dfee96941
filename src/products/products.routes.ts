// /api/products (docs/api-guide.md#products-and-stock): cacheable reads with ETag from version, management
// with If-Match. Typed problems. No version segment.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { etagFor, ifMatchVersions, noneMatchHits } from '../http/etag.js';
import { paged } from '../http/paging/pagination.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { IdParamSchema, NoContentSchema, problemResponses } from '../http/schemas.js';
import { ProductListQuerySchema, ProductPageSchema, ProductRequestSchema, ProductSchema } from './products.schemas.js';
import * as products from './products.service.js';

const tags = ['products'];
const read = { scope: 'products:read' };
const write = { scope: 'products:write' };
/** A product may be cached for an hour. */
const PRODUCT_CACHE_CONTROL = 'max-age=3600';

const productRoutes: FastifyPluginAsyncTypebox = async (app) => {
  routeDefaults(app, { problemForm: 'typed' });

  app.get('/', {
    config: read,
    schema: {
      tags,
      summary: 'List products',
      querystring: ProductListQuerySchema,
      response: { 200: ProductPageSchema, ...problemResponses(400, 401, 403) },
    },
    handler: async (request, reply) =>
      paged(request, reply.header('cache-control', 'no-cache'), await products.listProducts(request.db, request.query)),
  });

  app.get('/:id', {
    config: read,
    schema: {
      tags,
      summary: 'Get a product (cacheable: ETag from version, If-None-Match → 304)',
      params: IdParamSchema,
      response: { 200: ProductSchema, 304: NoContentSchema, ...problemResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) => {
      const product = await products.getProduct(request.db, request.params.id, () => request.raw.socket.destroyed);
      const etag = etagFor(product.version);
      reply.header('etag', etag).header('cache-control', PRODUCT_CACHE_CONTROL);
      if (noneMatchHits(request.headers['if-none-match'], etag)) return reply.code(304).send(undefined);
      return product;
    },
  });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Create a product (stock starts at 0)',
      body: ProductRequestSchema,
      response: { 201: ProductSchema, ...problemResponses(400, 401, 403, 409, 415) },
    },
    handler: async (request, reply) => {
      const product = await products.createProduct(request.db, request.body);
      return reply
        .code(201)
        .header('location', createdLocation(request, product.id))
        .header('etag', etagFor(product.version))
        .header('cache-control', 'no-store')
        .send(product);
    },
  });

  app.put('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Replace a product (If-Match optional; a stale version answers 412)',
      params: IdParamSchema,
      body: ProductRequestSchema,
      response: { 200: ProductSchema, ...problemResponses(400, 401, 403, 404, 409, 412, 415) },
    },
    handler: async (request, reply) => {
      const product = await products.replaceProduct(
        request.db,
        request.params.id,
        request.body,
        ifMatchVersions(request.headers['if-match']),
      );
      return reply.header('etag', etagFor(product.version)).header('cache-control', 'no-store').send(product);
    },
  });

  app.delete('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Delete a product (idempotent; If-Match optional)',
      params: IdParamSchema,
      response: { 204: NoContentSchema, ...problemResponses(400, 401, 403, 412) },
    },
    handler: async (request, reply) => {
      await products.deleteProduct(request.db, request.params.id, ifMatchVersions(request.headers['if-match']));
      return reply.code(204).send(undefined);
    },
  });
};

export default productRoutes;
