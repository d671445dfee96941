// /api/v1/webhook-subscriptions (docs/webhooks.md): the wire shapes, with examples for the document.
import { Type, type Static } from 'typebox';
import { EVENT_PATTERNS, EVENT_TYPES, type EventPattern } from '../events/index.js';
import { Id, Instant, Nullable, Page, PageParams, Text } from '../http/schemas.js';

export type { EventPattern };

const DESCRIPTION_MAX = 500;
const EVENTS_MAX = EVENT_PATTERNS.length;

const Url = () =>
  Type.String({
    format: 'uri',
    maxLength: 2048,
    description:
      'Where deliveries are POSTed: an absolute https: URL whose host is, and resolves to, public addresses only ' +
      '(http: and private networks only with WEBHOOK_ALLOW_PRIVATE_NETWORKS).',
    examples: ['https://hooks.example.com/resource-api'],
  });

const Events = () =>
  Type.Array(
    Type.Unsafe<EventPattern>({
      type: 'string',
      enum: [...EVENT_PATTERNS],
      'x-message': 'must be an event type, user.*, order.* or *',
    }),
    {
      minItems: 1,
      maxItems: EVENTS_MAX,
      uniqueItems: true,
      description: 'Event types to receive: exact types, `user.*`, `order.*` or `*` for all.',
      examples: [['order.shipped', 'order.delivered']],
    },
  );

export const CreateWebhookSubscriptionSchema = Type.Object(
  {
    url: Url(),
    events: Events(),
    description: Type.Optional(Text(DESCRIPTION_MAX, { examples: ['Shipping notifications for the warehouse'] })),
  },
  {
    title: 'CreateWebhookSubscriptionRequest',
    description: 'Unknown members are ignored.',
    examples: [
      {
        url: 'https://hooks.example.com/resource-api',
        events: ['order.*'],
        description: 'Order notifications for the warehouse',
      },
    ],
  },
);
export type CreateWebhookSubscription = Static<typeof CreateWebhookSubscriptionSchema>;

export const PatchWebhookSubscriptionSchema = Type.Object(
  {
    url: Type.Optional(Url()),
    events: Type.Optional(Events()),
    description: Type.Optional(Nullable(Text(DESCRIPTION_MAX))),
    enabled: Type.Optional(Type.Boolean({ description: 'false pauses deliveries; true resumes them' })),
  },
  {
    title: 'PatchWebhookSubscriptionRequest',
    description: 'Merge patch: members left out stay; description null clears it.',
    examples: [{ enabled: false }, { events: ['order.shipped'], description: null }],
  },
);
export type PatchWebhookSubscription = Static<typeof PatchWebhookSubscriptionSchema>;

const subscriptionMembers = {
  id: Id(),
  url: Url(),
  events: Events(),
  description: Type.Union([Text(DESCRIPTION_MAX), Type.Null()]),
  enabled: Type.Boolean(),
  createdAt: Instant(),
};

export const WebhookSubscriptionSchema = Type.Object(subscriptionMembers, {
  title: 'WebhookSubscription',
  description: 'A subscription; its secret is shown only when it is created or rotated.',
});

export const WebhookSubscriptionWithSecretSchema = Type.Object(
  {
    ...subscriptionMembers,
    secret: Type.String({
      pattern: '^whsec_[A-Za-z0-9+/]{43}=$',
      maxLength: 50,
      description:
        'The signing secret (Standard Webhooks): whsec_ and the base64 of 32 random bytes. Shown only in this answer: keep it.',
      examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw2nzaxOZmzv8='],
    }),
  },
  { title: 'WebhookSubscriptionWithSecret' },
);

export const WebhookSubscriptionPageSchema = Page(WebhookSubscriptionSchema, 'WebhookSubscriptionPage');
export const WebhookSubscriptionListQuerySchema = Type.Object({ ...PageParams });

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'dead'] as const;
const DeliveryStatus = () =>
  Type.Unsafe<(typeof DELIVERY_STATUSES)[number]>({
    type: 'string',
    enum: [...DELIVERY_STATUSES],
    'x-message': `must be one of ${DELIVERY_STATUSES.join(', ')}`,
    description: 'pending (not yet sent, or being sent), failed (to be tried again), delivered, dead (given up)',
  });

export const WebhookDeliverySchema = Type.Object(
  {
    id: Id(),
    eventId: Type.String({ format: 'uuid', maxLength: 36, description: 'The event id: the webhook-id header' }),
    eventType: Type.String({ enum: [...EVENT_TYPES] }),
    status: DeliveryStatus(),
    attempts: Type.Integer({
      minimum: 0,
      maximum: 2_147_483_647, // the column's integer
      description: 'Every attempt made so far, those before a redelivery too: it never goes down',
    }),
    lastAttemptAt: Type.Union([Instant(), Type.Null()]),
    lastResponseStatus: Type.Union([Type.Integer({ minimum: 100, maximum: 599 }), Type.Null()]),
    lastError: Type.Union([Text(500), Type.Null()]),
    nextAttemptAt: Type.Union([Instant(), Type.Null()]),
  },
  { title: 'WebhookDelivery' },
);

export const WebhookDeliveryPageSchema = Page(WebhookDeliverySchema, 'WebhookDeliveryPage');
export const WebhookDeliveryListQuerySchema = Type.Object({
  status: Type.Optional(DeliveryStatus()),
  ...PageParams,
});
export const DeliveryParamsSchema = Type.Object({ id: Id(), deliveryId: Id() });
