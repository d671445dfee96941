// Every answer a test receives is checked against the OpenAPI document the service serves: the
// status must be documented for the operation, the media type and body must match the documented
// content (or be empty where none is), and each documented header that is present must match its
// schema. buildTestApp installs it on every app, so a behaviour change without a document change
// fails the test file that saw it (issue: "an OpenAPI document clients can trust").
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { routeOptionsOf } from '../../src/http/request-context.js';
import { at, refPath } from './openapi.js';

type Json = Record<string, unknown>;
interface Media {
  schema?: Json;
}
interface Response {
  $ref?: string;
  content?: Record<string, Media>;
  headers?: Record<string, { $ref?: string; schema?: Json; required?: boolean }>;
}
interface Document {
  paths: Record<string, Record<string, { responses?: Record<string, Response> }>>;
  components?: { headers?: Record<string, { schema?: Json }> };
}

export interface Violation {
  request: string;
  status: number;
  problem: string;
}

const addFormats = addFormatsPlugin as unknown as (ajv: Ajv2020) => Ajv2020;

const escapePointer = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

class Conformance {
  readonly violations: Violation[] = [];
  /** Answers checked against a documented operation. */
  checked = 0;
  readonly #ajv: Ajv2020;
  readonly #validators = new Map<string, ValidateFunction>();

  constructor(readonly document: Document) {
    this.#ajv = addFormats(new Ajv2020({ strict: false, allErrors: true, validateFormats: true }));
    this.#ajv.addSchema({ ...document, $id: 'openapi' });
  }

  #validator(pointer: string[]): ValidateFunction {
    const ref = `openapi#/${pointer.map(escapePointer).join('/')}`;
    let validate = this.#validators.get(ref);
    if (validate === undefined) {
      validate = this.#ajv.compile({ $ref: ref });
      this.#validators.set(ref, validate);
    }
    return validate;
  }

  check(
    request: { method: string; url: string; route: string | undefined; hidden: boolean },
    status: number,
    headers: Record<string, unknown>,
    body: string | undefined,
  ): void {
    const label = `${request.method} ${request.url}`;
    const fail = (problem: string) => this.violations.push({ request: label, status, problem });
    const method = request.method.toLowerCase();
    // No route (404, 405), the docs page's assets, and routes a test adds for itself (/test/…).
    if (request.route === undefined || request.hidden || request.route.startsWith('/test/')) return;
    const path = request.route.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/(.)\/$/, '$1');
    const operation = this.document.paths[path]?.[method];
    if (operation === undefined) {
      if (method !== 'head' && method !== 'options') fail(`${method.toUpperCase()} ${path} is not in the document`);
      return;
    }
    const statusKey = operation.responses?.[String(status)] ? String(status) : 'default';
    let base = ['paths', path, method, 'responses', statusKey];
    let response = operation.responses?.[statusKey];
    if (response?.$ref !== undefined) {
      base = refPath(response.$ref);
      response = at(this.document, base) as Response | undefined;
    }
    if (response === undefined) {
      fail(`status ${status} is not documented for ${method.toUpperCase()} ${path}`);
      return;
    }
    this.checked++;

    // Body and media type.
    const contentType = (typeof headers['content-type'] === 'string' ? headers['content-type'] : '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    const empty = body === undefined || body.length === 0;
    if (response.content === undefined || Object.keys(response.content).length === 0) {
      if (!empty && method !== 'head') fail(`a body was sent where the document declares none (${contentType})`);
    } else if (!empty && method !== 'head') {
      const media = response.content[contentType];
      if (media === undefined) fail(`media type ${contentType || '(none)'} is not documented`);
      else if (media.schema !== undefined && /json/.test(contentType)) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(body);
        } catch {
          fail('the body is not JSON');
          return;
        }
        const validate = this.#validator([...base, 'content', contentType, 'schema']);
        if (!validate(parsed)) fail(`body: ${this.#ajv.errorsText(validate.errors, { dataVar: 'body' })}`);
      }
    } else if (empty && method !== 'head' && status !== 204 && status !== 304) {
      fail('no body, where the document declares content');
    }

    // Headers that the document describes, when present.
    for (const [name, declared] of Object.entries(response.headers ?? {})) {
      const value = headers[name.toLowerCase()];
      if (value === undefined) continue;
      const pointer =
        declared.$ref === undefined ? [...base, 'headers', name, 'schema'] : [...refPath(declared.$ref), 'schema'];
      const schema = at(this.document, pointer) as Json | undefined;
      if (schema === undefined) continue;
      const text = Array.isArray(value)
        ? value.join(', ')
        : typeof value === 'number'
          ? String(value)
          : (value as string);
      const typed = schema.type === 'integer' || schema.type === 'number' ? Number(text) : text;
      const validate = this.#validator(pointer);
      if (!validate(typed)) fail(`header ${name}: ${this.#ajv.errorsText(validate.errors, { dataVar: name })}`);
    }
  }
}

const conformances = new WeakMap<FastifyInstance, Conformance>();

/** The observer plugin buildTestApp installs; violations() reads what it found. */
export const openapiConformance: FastifyPluginAsync = fp(
  async (app) => {
    app.addHook('onSend', (request, reply, payload, done) => {
      let conformance = conformances.get(app);
      if (conformance === undefined) {
        conformance = new Conformance(app.swagger() as unknown as Document);
        conformances.set(app, conformance);
      }
      const body =
        typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : undefined;
      const streamed = payload !== null && payload !== undefined && body === undefined;
      if (!streamed) {
        const { schema, url } = routeOptionsOf(request);
        conformance.check(
          {
            method: request.method,
            url: request.url,
            route: request.is404 ? undefined : url,
            hidden: schema?.hide === true,
          },
          reply.statusCode,
          reply.getHeaders(),
          body,
        );
      }
      done(null, payload);
    });
  },
  { name: 'openapi-conformance' },
);

export function violations(app: FastifyInstance): Violation[] {
  return conformances.get(app)?.violations ?? [];
}

/** How many answers were checked against a documented operation (a test of the checker reads it). */
export function checkedAnswers(app: FastifyInstance): number {
  return conformances.get(app)?.checked ?? 0;
}
