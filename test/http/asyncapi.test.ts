// /api/public/asyncapi.json (docs/webhooks.md): an AsyncAPI 3.0 document that the reference parser
// accepts without an error, listing every event type, whose payloads are the very schemas the
// API serves, and which a real delivery's body satisfies (test/events/webhook-deliveries.test.ts does
// the same against the OpenAPI `webhooks`).
import { DiagnosticSeverity, Parser } from '@asyncapi/parser';
import { Ajv } from 'ajv';
import addFormatsPlugin from 'ajv-formats';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, toCloudEvent } from '../../src/events/index.js';
import { buildTestApp } from '../support/test-app.js';
import { inline } from '../support/openapi.js';
import { ADMIN } from '../support/tokens.js';

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsPlugin as unknown as (ajv: Ajv) => Ajv;

const { app } = await buildTestApp({ BASE_URL: 'https://api.example.com' });

describe('GET /api/public/asyncapi.json', () => {
  it('is AsyncAPI 3.0 that @asyncapi/parser accepts with no error', async () => {
    const response = await app.inject({ method: 'GET', url: '/api/public/asyncapi.json' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    const { document, diagnostics } = await new Parser().parse(response.body);
    // The parser's types and its diagnostics' name the same enum from two copies of @stoplight/types.
    // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-comparison
    const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
    expect(errors, JSON.stringify(errors, null, 2)).toEqual([]);
    expect(document?.version()).toBe('3.0.0');
    // Each event type on both channels: the webhook deliveries and the event stream.
    for (const channel of ['webhook', 'events']) {
      const names = document
        ?.channels()
        .get(channel)
        ?.messages()
        .all()
        .map((m) => m.name());
      expect(names?.sort(), channel).toEqual([...EVENT_TYPES].sort());
    }
  });

  it('describes the events the service writes: a stored event satisfies its message payload', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/api/public/asyncapi.json' })).json<Record<string, unknown>>();
    const resolved = inline(doc, doc) as {
      components: { messages: Record<string, { payload: object }> };
    };
    const created = await app.inject({
      method: 'POST',
      url: '/api/v1/users',
      headers: { authorization: ADMIN },
      payload: { name: 'Ada Async', email: 'ada.async@example.com', password: 'correct horse battery' },
    });
    expect(created.statusCode).toBe(201);
    const { rows } = await sql<{ id: string; type: 'user.created'; subject: string; time: Date; data: string }>`
      select id::text as id, type, subject, time, data from events order by sequence desc limit 1`.execute(app.db);
    const event = JSON.parse(toCloudEvent(rows[0]!, 'https://api.example.com/api/v1')) as unknown;
    const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
    const valid = ajv.compile(resolved.components.messages.user_created!.payload);
    expect(valid(event), JSON.stringify(valid.errors)).toBe(true);
    const wrong = ajv.compile(resolved.components.messages.order_created!.payload);
    expect(wrong(event)).toBe(false);
    const streamed = ajv.compile(resolved.components.messages.stream_user_created!.payload);
    expect(streamed(event), JSON.stringify(streamed.errors)).toBe(true);
  });
});
