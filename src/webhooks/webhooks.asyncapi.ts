// The AsyncAPI 3.0 document of the events (DESIGN §12), served at /api/public/asyncapi.json:
// what the service sends to webhook subscribers. Built from the same schemas as the routes and
// the OpenAPI `webhooks` (UserResponse and OrderDetail are the v1 response schemas themselves).
import { EVENT_TYPES } from '../events/index.js';
import { OrderDetailSchema } from '../orders/index.js';
import { UserV1Schema } from '../users/index.js';
import { cloudEvent, HEADERS } from './webhooks.openapi.js';

type Json = Record<string, unknown>;

/** TypeBox schemas as plain JSON (their Symbol-keyed members are TypeBox's own). */
const plain = (schema: unknown): Json => JSON.parse(JSON.stringify(schema)) as Json;

export function asyncApiDocument(baseUrl: string): Json {
  const url = new URL(baseUrl);
  const messages: Json = {};
  for (const type of EVENT_TYPES) {
    messages[type.replace('.', '_')] = {
      name: type,
      title: type,
      summary: `The ${type} event, as a CloudEvents 1.0 document`,
      contentType: 'application/cloudevents+json',
      headers: {
        type: 'object',
        required: HEADERS.map((h) => h.name),
        properties: Object.fromEntries(HEADERS.map((h) => [h.name, { ...h.schema, description: h.description }])),
      },
      payload: cloudEvent(type, '#/components/schemas'),
    };
  }
  const refs = Object.fromEntries(Object.keys(messages).map((k) => [k, { $ref: `#/components/messages/${k}` }]));
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Resource API events',
      version: '1.0.0',
      description:
        'Every change of a user or an order is an event, written in the same transaction as the change. ' +
        'Webhook subscriptions (POST /api/v1/webhook-subscriptions) receive them as signed HTTP POSTs in the ' +
        'Standard Webhooks format: at least once, the same webhook-id on every retry, in order per subject.',
    },
    servers: {
      api: {
        host: url.host,
        protocol: url.protocol.replace(':', ''),
        pathname: '/api/v1',
        description: 'The instance that sends the deliveries (BASE_URL)',
      },
    },
    channels: {
      webhook: {
        address: null,
        title: 'A webhook subscription’s URL',
        description: 'Each subscription’s own URL; the events it lists are POSTed there.',
        messages: refs,
      },
    },
    operations: {
      deliverWebhook: {
        action: 'send',
        channel: { $ref: '#/channels/webhook' },
        summary: 'Deliver an event to a subscription (POST; a 2xx acknowledges; 410 disables it)',
        messages: Object.keys(messages).map((k) => ({ $ref: `#/channels/webhook/messages/${k}` })),
      },
    },
    components: {
      messages,
      schemas: { UserResponse: plain(UserV1Schema), OrderDetail: plain(OrderDetailSchema) },
    },
  };
}
