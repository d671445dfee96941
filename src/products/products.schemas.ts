import { Type, type Static } from 'typebox';
import { Id, Instant, NotBlank, Page, PageParams, Text } from '../http/schemas.js';

export const ProductSchema = Type.Object(
  {
    id: Id(),
    sku: Text(64),
    name: Text(200),
    description: Type.Union([Text(2000), Type.Null()]),
    price: Type.Number({ description: 'decimal, two places at most', examples: [19.99] }),
    version: Type.Integer({
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'starts at 1, increments on every change; the ETag is "<version>"',
    }),
    createdAt: Instant(),
    updatedAt: Instant(),
  },
  { title: 'Product' },
);
export type Product = Static<typeof ProductSchema>;

export const ProductRequestSchema = Type.Object(
  {
    sku: NotBlank({ maxLength: 64 }),
    name: NotBlank({ minLength: 2, maxLength: 200 }),
    description: Type.Optional(Type.Unsafe<string | null>({ type: ['string', 'null'], maxLength: 2000 })),
    price: Type.Number({
      minimum: 0,
      maximum: 9_999_999_999.99,
      multipleOf: 0.01,
      'x-message': 'must have at most 2 decimal places',
      examples: [19.99],
    }),
  },
  { title: 'ProductRequest', description: 'Create or replace a product. Unknown members are ignored.' },
);
export type ProductRequest = Static<typeof ProductRequestSchema>;

export const ProductListQuerySchema = Type.Object(PageParams);
export const ProductPageSchema = Page(ProductSchema, 'ProductPage');

const Units = (description?: string) =>
  Type.Integer({ minimum: 0, maximum: 2_147_483_647, ...(description ? { description } : {}) });

export const StockSchema = Type.Object(
  {
    productId: Id(),
    available: Units('units that can still be ordered'),
    reserved: Units('units held by orders that have not shipped'),
    updatedAt: Instant(),
  },
  { title: 'Stock' },
);
export type Stock = Static<typeof StockSchema>;

export const SetStockSchema = Type.Object({ available: Units() }, { title: 'SetStockRequest' });
export type SetStock = Static<typeof SetStockSchema>;

export const ProductIdParamSchema = Type.Object({ productId: Id() });
