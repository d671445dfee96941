// The AsyncAPI 3.0 document of the events (docs/webhooks.md), served at /api/public/asyncapi.json:
// what the service sends to webhook subscribers. Built from the same schemas as the routes and
// the OpenAPI `webhooks`: the caller passes the v1 response schemas of users and orders (as the
// OpenAPI document holds them), so webhooks/ imports neither resource.
import { EVENT_TYPES } from '../events/index.js';
import { cloudEvent, HEADERS } from './webhooks.openapi.js';

type Json = Record<string, unknown>;

/** TypeBox schemas as plain JSON (their Symbol-keyed members are TypeBox's own). */
const plain = (schema: unknown): Json => JSON.parse(JSON.stringify(schema)) as Json;

/** The schemas of the events' `data`: the v1 representations of a user and of an order. */
export interface EventDataSchemas {
  user: unknown;
  order: unknown;
}

export function asyncApiDocument(baseUrl: string, schemas: EventDataSchemas): Json {
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
  // The same events on the stream (GET /api/v1/events): the CloudEvent is the `data` field, and
  // the SSE fields `id` and `event` play the part of the webhook headers.
  const streamMessages: Json = {};
  for (const type of EVENT_TYPES) {
    streamMessages[`stream_${type.replace('.', '_')}`] = {
      name: type,
      title: `${type} (stream)`,
      summary: `The ${type} event on the event stream: an SSE message whose data is the CloudEvent`,
      contentType: 'application/cloudevents+json',
      headers: {
        type: 'object',
        required: ['id', 'event'],
        properties: {
          id: {
            type: 'string',
            pattern: '^[1-9][0-9]*$',
            description: 'The SSE `id` field: the event’s sequence; send it back as Last-Event-ID to resume',
          },
          event: { type: 'string', const: type, description: 'The SSE `event` field: the event type' },
        },
      },
      payload: cloudEvent(type, '#/components/schemas'),
    };
  }
  const refs = Object.fromEntries(Object.keys(messages).map((k) => [k, { $ref: `#/components/messages/${k}` }]));
  const streamRefs = Object.fromEntries(
    Object.keys(streamMessages).map((k) => [k, { $ref: `#/components/messages/${k}` }]),
  );
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Resource API events',
      version: '1.0.0',
      description:
        'Every change of a user or an order is an event, written in the same transaction as the change. ' +
        'Webhook subscriptions (POST /api/v1/webhook-subscriptions) receive them as signed HTTP POSTs in the ' +
        'Standard Webhooks format: at least once, the same webhook-id on every retry, in order per subject. ' +
        'Clients read them live from the event stream, GET /api/v1/events (Server-Sent Events), resumable with ' +
        'Last-Event-ID; its messages are the same CloudEvents.',
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
      events: {
        address: '/events',
        servers: [{ $ref: '#/servers/api' }],
        title: 'The event stream',
        description:
          'GET /api/v1/events with Accept: text/event-stream and a Bearer token (orders:read for order events, ' +
          'users:read for user events; without admin only the caller’s own orders and user). Optional ' +
          '`types=order.*,user.deleted`; Last-Event-ID resumes after that event and no event is skipped. A comment ' +
          'line every 15 s keeps proxies open.',
        messages: streamRefs,
      },
    },
    operations: {
      deliverWebhook: {
        action: 'send',
        channel: { $ref: '#/channels/webhook' },
        summary: 'Deliver an event to a subscription (POST; a 2xx acknowledges; 410 disables it)',
        messages: Object.keys(messages).map((k) => ({ $ref: `#/channels/webhook/messages/${k}` })),
      },
      streamEvents: {
        action: 'send',
        channel: { $ref: '#/channels/events' },
        summary: 'Send each event the caller may read to its open stream, in commit order',
        bindings: { http: { method: 'GET', bindingVersion: '0.3.0' } },
        messages: Object.keys(streamMessages).map((k) => ({ $ref: `#/channels/events/messages/${k}` })),
      },
    },
    components: {
      messages: { ...messages, ...streamMessages },
      schemas: { UserResponse: plain(schemas.user), OrderDetail: plain(schemas.order) },
    },
  };
}
