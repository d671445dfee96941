import { Type, type Static } from 'typebox';
import { Id, Instant, NotBlank, Nullable, CursorParam, Page, PageParams, PostalCode, Text } from '../http/schemas.js';
import { ORDER_STATUSES, type OrderStatus } from './order-status.js';

export const OrderStatusSchema = Type.Unsafe<OrderStatus>({
  type: 'string',
  enum: [...ORDER_STATUSES],
  description: 'PENDING → CONFIRMED → SHIPPED → DELIVERED; CANCELLED from PENDING or CONFIRMED',
});

const NOTE_MAX = 500;
const STREET_MAX = 200;
const ITEMS_MAX = 100;
const AddressSchema = Type.Object({ street: Text(STREET_MAX), postalCode: PostalCode() }, { title: 'Address' });

const Quantity = () => Type.Integer({ exclusiveMinimum: 0, maximum: 100_000 });

export const OrderDetailSchema = Type.Object(
  {
    id: Id(),
    customerId: Id(),
    status: OrderStatusSchema,
    total: Type.Number({ description: 'Σ unit price × quantity, exact', examples: [59.97] }),
    note: Type.Union([Text(NOTE_MAX), Type.Null()]),
    shippingAddress: Type.Union([AddressSchema, Type.Null()]),
    cancellationReason: Type.Union([Text(NOTE_MAX), Type.Null()]),
    createdAt: Instant(),
    updatedAt: Instant(),
  },
  { title: 'OrderDetail' },
);
export type OrderDetail = Static<typeof OrderDetailSchema>;

export const OrderSummarySchema = Type.Object(
  {
    id: Id(),
    customerId: Id(),
    status: OrderStatusSchema,
    total: Type.Number(),
    itemCount: Type.Integer({ minimum: 1, maximum: ITEMS_MAX }),
    createdAt: Instant(),
  },
  { title: 'OrderSummary' },
);
export type OrderSummary = Static<typeof OrderSummarySchema>;

export const OrderItemSchema = Type.Object(
  {
    productId: Id(),
    productName: Text(200),
    quantity: Quantity(),
    unitPrice: Type.Number(),
    lineTotal: Type.Number(),
  },
  { title: 'OrderItem' },
);
export type OrderItem = Static<typeof OrderItemSchema>;

export const CreateOrderV1Schema = Type.Object(
  { productId: Id('The product to order'), quantity: Quantity() },
  {
    title: 'CreateOrderRequest',
    description: 'The customer is the caller (the token subject). Unknown members are ignored.',
  },
);
export type CreateOrderV1 = Static<typeof CreateOrderV1Schema>;

export const CancellationSchema = Type.Object(
  { reason: NotBlank({ maxLength: NOTE_MAX }) },
  { title: 'CancellationRequest' },
);
export type Cancellation = Static<typeof CancellationSchema>;

export const UpdateOrderSchema = Type.Object(
  {
    note: Type.Optional(Nullable(Type.String({ maxLength: NOTE_MAX }))),
    shippingAddress: Type.Optional(
      Nullable(Type.Object({ street: NotBlank({ maxLength: STREET_MAX }), postalCode: PostalCode() })),
    ),
  },
  {
    title: 'UpdateOrderRequest',
    description:
      'Merge patch: a member sent as null clears it; one left out stays. Allowed while PENDING or CONFIRMED.',
  },
);
export type UpdateOrder = Static<typeof UpdateOrderSchema>;

export const ORDER_SORT_FIELDS = ['id', 'createdAt', 'total', 'status'] as const;
export type OrderSortField = (typeof ORDER_SORT_FIELDS)[number];

export const OrderListQuerySchema = Type.Object({
  status: Type.Optional(
    Type.String({ enum: [...ORDER_STATUSES], 'x-message': `must be one of ${ORDER_STATUSES.join(', ')}` }),
  ),
  customerId: Type.Optional(Id('Only this customer’s orders')),
  sort: Type.String({
    default: 'createdAt,desc',
    maxLength: 20,
    pattern: `^(${ORDER_SORT_FIELDS.join('|')})(,(asc|desc|ASC|DESC))?$`,
    'x-message': `must be <field>,<direction> with field one of ${ORDER_SORT_FIELDS.join(', ')} and direction asc or desc`,
    description: '<field>,<direction>; ties are broken by id',
  }),
  ...PageParams,
  cursor: CursorParam(),
});
export type OrderListQuery = Static<typeof OrderListQuerySchema>;

export const OrderPageSchema = Page(OrderSummarySchema, 'OrderPage');
export const OrderItemsSchema = Type.Array(OrderItemSchema, { maxItems: ITEMS_MAX });

// v2 (docs/api-guide.md#versions): a customer and a list of items.
export const CreateOrderV2Schema = Type.Object(
  {
    customerId: Id('The customer; another customer than the caller needs the admin scope'),
    items: Type.Array(
      Type.Object({ productId: Id('The product to order'), quantity: Quantity() }, { title: 'OrderLineRequest' }),
      {
        minItems: 1,
        maxItems: ITEMS_MAX,
        'x-message': 'Order must have at least one item',
      },
    ),
  },
  { title: 'CreateOrderRequestV2', description: 'Unknown members are ignored.' },
);
export type CreateOrderV2 = Static<typeof CreateOrderV2Schema>;
