// The OpenAPI 3.1 `webhooks` section (docs/webhooks.md): one entry per event type, the POST a
// subscriber receives. Added after the document's passes; `data` refers to the components the
// routes already define (UserResponse, OrderDetail), so the shapes cannot drift from the API's.
import { EVENT_TYPES, type EventType } from '../events/index.js';

type Json = Record<string, unknown>;

const ID_ONLY = new Set<EventType>(['user.deleted', 'user.password_changed', 'order.deleted']);

function dataSchema(type: EventType, schemas: string): Json {
  if (ID_ONLY.has(type)) {
    return {
      type: 'object',
      required: ['id'],
      properties: { id: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' } },
      additionalProperties: false,
    };
  }
  return { $ref: `${schemas}/${type.startsWith('user.') ? 'UserResponse' : 'OrderDetail'}` };
}

/** The CloudEvent a delivery of `type` carries; `schemas` is where UserResponse and OrderDetail are. */
export function cloudEvent(type: EventType, schemas = '#/components/schemas'): Json {
  const str = (maxLength: number, extra: Json = {}) => ({ type: 'string', maxLength, ...extra });
  return {
    type: 'object',
    description: 'A CloudEvents 1.0 document in JSON structured mode',
    required: ['specversion', 'id', 'source', 'type', 'subject', 'time', 'datacontenttype', 'data'],
    properties: {
      specversion: { type: 'string', const: '1.0' },
      id: str(36, { format: 'uuid', description: 'Unique and stable: the webhook-id header, the same on every retry' }),
      source: str(2048, { format: 'uri', description: '<BASE_URL>/api/v1' }),
      type: { type: 'string', const: type },
      subject: str(40, {
        pattern: type.startsWith('user.') ? '^users/[0-9]+$' : '^orders/[0-9]+$',
        description: 'users/<id> or orders/<id>',
      }),
      time: str(30, { format: 'date-time' }),
      datacontenttype: { type: 'string', const: 'application/json' },
      data: dataSchema(type, schemas),
    },
  };
}

interface HeaderParameter {
  in: 'header';
  name: string;
  required: boolean;
  description: string;
  schema: Json;
}

export const HEADERS: HeaderParameter[] = [
  {
    in: 'header',
    name: 'webhook-id',
    required: true,
    description: 'The event id: the same on every retry of this delivery; deduplicate on it',
    schema: { type: 'string', format: 'uuid', maxLength: 36 },
  },
  {
    in: 'header',
    name: 'webhook-timestamp',
    required: true,
    description: 'Unix seconds of this attempt; refuse one too far from your clock',
    schema: { type: 'string', pattern: '^[0-9]{1,12}$', maxLength: 12 },
  },
  {
    in: 'header',
    name: 'webhook-signature',
    required: true,
    description:
      'Standard Webhooks: `v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">` keyed with the ' +
      'base64-decoded secret after whsec_; two, space-separated, during a secret rotation’s overlap',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/=]{44}( v1,[A-Za-z0-9+/=]{44})?$', maxLength: 91 },
  },
];

/** Adds `webhooks` to the document: one POST per event type. */
export function addWebhooks(document: Json): void {
  const webhooks: Json = {};
  for (const type of EVENT_TYPES) {
    webhooks[type] = {
      post: {
        operationId: `webhook_${type.replace('.', '_')}`,
        tags: ['webhooks'],
        summary: `${type}: sent to each subscription whose events include it`,
        description:
          'A 2xx within WEBHOOK_TIMEOUT_MS is delivered; anything else is retried on WEBHOOK_RETRY_SCHEDULE, then ' +
          'dead; 410 disables the subscription. Redirects are not followed.',
        parameters: HEADERS,
        requestBody: {
          required: true,
          content: { 'application/cloudevents+json': { schema: cloudEvent(type) } },
        },
        responses: {
          '2XX': { description: 'Delivered' },
          '410': { description: 'Gone: the subscription is disabled' },
          default: { description: 'Not delivered: retried later' },
        },
        security: [],
      },
    };
  }
  document.webhooks = webhooks;
}
