import { Type, type Static } from 'typebox';
import { Id, Instant, NotBlank, Page, PageParams } from '../http/schemas.js';

export const ProductSchema = Type.Object(
  {
    id: Type.Integer(),
    sku: Type.String(),
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    price: Type.Number({ description: 'decimal, two places at most', examples: [19.99] }),
    version: Type.Integer({ description: 'starts at 1, increments on every change; the ETag is "<version>"' }),
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
export const ProductPageSchema = Page(ProductSchema);

export const StockSchema = Type.Object(
  {
    productId: Type.Integer(),
    available: Type.Integer({ description: 'units that can still be ordered' }),
    reserved: Type.Integer({ description: 'units held by orders that have not shipped' }),
    updatedAt: Instant(),
  },
  { title: 'Stock' },
);
export type Stock = Static<typeof StockSchema>;

export const SetStockSchema = Type.Object(
  { available: Type.Integer({ minimum: 0, maximum: 2_147_483_647 }) },
  { title: 'SetStockRequest' },
);
export type SetStock = Static<typeof SetStockSchema>;

export const ProductIdParamSchema = Type.Object({ productId: Id() });
