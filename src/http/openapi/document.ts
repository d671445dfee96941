// What the route schemas cannot say by themselves, applied once to the generated OpenAPI
// document (issue: "an OpenAPI document clients can trust"). Each pass is a rule about the
// whole API, so no route repeats it, and the served document, `npm run openapi` and the tests
// that validate every response against it all see the same result.

import { problemResponses } from '../schemas.js';

type Json = Record<string, unknown>;

export interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { in: string; name: string; required?: boolean; schema?: Json; [member: string]: unknown }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Json }> };
  responses?: Record<string, Response>;
}

export interface Response {
  $ref?: string;
  description?: string;
  content?: Record<string, { schema?: Json }>;
  headers?: Record<string, unknown>;
}

export interface Document {
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Json>; [member: string]: unknown };
  tags?: { name: string; description?: string }[];
  security?: unknown[];
}

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function operations(document: Document): [path: string, method: string, operation: Operation][] {
  return Object.entries(document.paths ?? {}).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]): [string, string, Operation] => [path, method, operation]),
  );
}

/**
 * A query parameter with a default need not be sent: the service fills it in. (TypeBox lists it
 * in `required` because the handler always sees it.)
 */
export function parametersWithDefaultsOptional(document: Document): void {
  for (const [, , operation] of operations(document))
    for (const parameter of operation.parameters ?? [])
      if (parameter.in !== 'path' && parameter.schema?.default !== undefined) parameter.required = false;
}

/** 204, 304 and 202 answers have no body: no content is declared for them. */
export function noContentWithoutBody(document: Document): void {
  for (const [, , operation] of operations(document))
    for (const [status, response] of Object.entries(operation.responses ?? {})) {
      const schemas = Object.values(response.content ?? {}).map((media) => media.schema);
      // NoContentSchema (http/schemas.ts) is how a route says "no body" to fast-json-stringify.
      const declaredEmpty =
        schemas.length > 0 &&
        schemas.every((s) => isObject(s) && Object.keys(s).join() === 'description' && s.description === 'No content');
      if (status === '204' || status === '304' || declaredEmpty) delete response.content;
    }
}

/** A body with no members to send (the order actions but cancellation) may be left out. */
export function emptyBodiesOptional(document: Document): void {
  for (const [, , operation] of operations(document)) {
    const body = operation.requestBody;
    if (body === undefined) continue;
    const schemas = Object.values(body.content ?? {}).map((media) => media.schema ?? {});
    const empty = (s: Json) =>
      s.type === 'object' && Object.keys((s.properties as Json | undefined) ?? {}).length === 0;
    if (schemas.length > 0 && schemas.every(empty)) body.required = false;
  }
}

/** Every schema object under `node`, depth first, children before their parent. */
function* schemaObjects(node: unknown): Generator<Json> {
  if (Array.isArray(node)) for (const item of node) yield* schemaObjects(item);
  else if (isObject(node)) {
    for (const value of Object.values(node)) yield* schemaObjects(value);
    yield node;
  }
}

/**
 * Money is exact in the service (numeric in the database, checked to the cent on input), but
 * `multipleOf: 0.01` fails in every validator that divides in floating point (19.99 / 0.01 is
 * not an integer there). The document states the rule in words and as `x-decimal-places`.
 */
export function decimalPlacesInWords(document: Document): void {
  for (const schema of schemaObjects(document.paths)) {
    const step = schema.multipleOf;
    if (typeof step !== 'number' || Number.isInteger(step)) continue;
    const places = Math.round(-Math.log10(step));
    delete schema.multipleOf;
    schema['x-decimal-places'] = places;
    const rule = `At most ${places} decimal places.`;
    schema.description = typeof schema.description === 'string' ? `${schema.description}. ${rule}` : rule;
  }
}

/**
 * A stable operationId from the method and the path, unique by construction:
 * GET /api/v1/users/{id}/password-changes → getV1UsersByIdPasswordChanges.
 */
export function operationIdOf(method: string, path: string): string {
  const words = path
    .replace(/^\/api\//, '')
    .split('/')
    .filter((segment) => segment !== '' && segment !== 'public')
    .map((segment) => {
      const parameter = /^\{(.+)\}$/.exec(segment)?.[1];
      return parameter === undefined ? segment : `by-${parameter}`;
    })
    .flatMap((segment) => segment.split(/[-_]/));
  return method + words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');
}

export function operationIdsAndDescriptions(document: Document): void {
  for (const [path, method, operation] of operations(document)) {
    operation.operationId ??= operationIdOf(method, path);
    operation.description ??= operation.summary ?? `${method.toUpperCase()} ${path}`;
  }
}

/**
 * OWASP API4 wants a format on every integer; in the route schemas it would change validation
 * (ajv-formats checks int32), so the document derives it from the bounds the schema already has.
 */
export function integerFormats(document: Document): void {
  const INT32 = 2 ** 31;
  for (const schema of schemaObjects([document.paths, document.components])) {
    if (schema.type !== 'integer' || schema.format !== undefined) continue;
    const { minimum, maximum } = schema as { minimum?: number; maximum?: number };
    const fits = (n: number | undefined) => n !== undefined && n >= -INT32 && n < INT32;
    schema.format = fits(minimum) && fits(maximum) ? 'int32' : 'int64';
  }
}

/** Every tag an operation uses is declared at the top, with a description. */
export function declareTags(document: Document, descriptions: Record<string, string>): void {
  const used = new Set(operations(document).flatMap(([, , operation]) => operation.tags ?? []));
  document.tags = [...used].map((name) => {
    const description = descriptions[name];
    if (description === undefined) throw new Error(`OpenAPI tag "${name}" has no description`);
    return { name, description };
  });
}

/**
 * The answers every operation can give whatever its route says: 400 (a malformed URL or query),
 * 406 (an Accept it cannot meet), 500 and 503 (database unavailable, REQUEST_TIMEOUT_MS; with
 * Retry-After) everywhere; 413 and 415 wherever a body can be sent; 401 and 403 where a token is
 * required (docs/api-guide.md#authentication-and-scopes, docs/api-guide.md#errors, docs/api-guide.md#limits-and-time-outs).
 */
export function standardProblemResponses(document: Document): void {
  for (const [path, method, operation] of operations(document)) {
    const responses = (operation.responses ??= {});
    const secured = (operation.security ?? document.security ?? []).length > 0;
    const statuses = [400, ...(secured ? [401, 403] : []), 406, 500];
    if (method !== 'get' && method !== 'head') statuses.push(413, 415);
    if (path !== '/api/public/health/live') statuses.push(503);
    // TypeBox's schema type is a plain JSON object here, as in the rest of the document.
    const standard = problemResponses(...statuses) as unknown as Record<string, Response>;
    for (const [status, response] of Object.entries(standard)) responses[status] ??= response;
    const unavailable = responses['503'];
    if (unavailable !== undefined && unavailable.$ref === undefined)
      unavailable.headers = {
        'Retry-After': {
          description: 'Seconds to wait before retrying',
          schema: { type: 'integer', minimum: 1, maximum: 60 },
        },
        ...unavailable.headers,
      };
  }
}

/** Every answer may carry the CORS headers (docs/api-guide.md#cross-origin-requests-cors); documented once for all. */
export function corsHeaders(document: Document): void {
  const header = {
    'Access-Control-Allow-Origin': {
      description: 'The request’s Origin, when CORS_ORIGINS allows it (absent otherwise)',
      schema: { type: 'string', maxLength: 2048 },
    },
  };
  for (const [, , operation] of operations(document))
    for (const response of Object.values(operation.responses ?? {}))
      response.headers = { ...response.headers, ...header };
}

/**
 * Shared schemas become components: every schema with a `title` (the wire shapes: User, Order,
 * Problem, …) is defined once under components.schemas and referenced with $ref, innermost first
 * so components refer to each other. Two different schemas with one title are a bug: refused.
 */
export function schemasAsComponents(document: Document): void {
  const components = ((document.components ??= {}).schemas ??= {});
  const canonical = new Map<string, string>();
  const replace = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(replace);
    if (!isObject(node)) return node;
    const out: Json = {};
    for (const [key, value] of Object.entries(node)) out[key] = replace(value);
    const title = out.title;
    if (typeof title !== 'string' || !/^[A-Za-z][A-Za-z0-9]*$/.test(title)) return out;
    const text = JSON.stringify(out);
    const seen = canonical.get(title);
    if (seen === undefined) {
      canonical.set(title, text);
      components[title] = out;
    } else if (seen !== text) {
      throw new Error(`OpenAPI: two different schemas are both titled "${title}"`);
    }
    return { $ref: `#/components/schemas/${title}` };
  };
  document.paths = replace(document.paths) as Document['paths'];
}

/**
 * Response headers that read the same everywhere (RateLimit, Retry-After, ETag, …) are defined
 * once under components.headers and referenced; one that differs from the first of its name
 * stays inline.
 */
export function headersAsComponents(document: Document): void {
  const components = ((document.components ??= {}).headers ??= {}) as Record<string, unknown>;
  const canonical = new Map<string, string>();
  for (const [, , operation] of operations(document))
    for (const response of Object.values(operation.responses ?? {})) {
      const headers = response.headers ?? {};
      for (const [name, header] of Object.entries(headers)) {
        const key = name.replace(/[^A-Za-z0-9._-]/g, '');
        const text = JSON.stringify(header);
        const seen = canonical.get(key);
        if (seen === undefined) {
          canonical.set(key, text);
          components[key] = header;
        }
        if (seen === undefined || seen === text) headers[name] = { $ref: `#/components/headers/${key}` };
      }
    }
}

/**
 * Problem answers (application/problem+json only) read alike across operations (one description
 * per status, http/schemas.ts problemResponses), and the most common answer of each status is defined once under
 * components.responses (Problem404, …) and referenced; the few that differ (no RateLimit fields
 * on the health probes) stay inline.
 */
export function problemResponsesAsComponents(document: Document): void {
  const components = ((document.components ??= {}).responses ??= {}) as Record<string, unknown>;
  const problems: { responses: Record<string, Response>; status: string; text: string }[] = [];
  for (const [, , operation] of operations(document)) {
    const responses = operation.responses ?? {};
    for (const [status, response] of Object.entries(responses)) {
      const media = Object.keys(response.content ?? {});
      if (media.length !== 1 || media[0] !== 'application/problem+json') continue;
      problems.push({ responses, status, text: JSON.stringify(response) });
    }
  }
  const counts = new Map<string, number>();
  for (const { status, text } of problems) counts.set(`${status} ${text}`, (counts.get(`${status} ${text}`) ?? 0) + 1);
  const commonest = new Map<string, { text: string; count: number }>();
  for (const [key, count] of counts) {
    const status = key.slice(0, key.indexOf(' '));
    const text = key.slice(status.length + 1);
    if ((commonest.get(status)?.count ?? 0) < count) commonest.set(status, { text, count });
  }
  for (const { responses, status, text } of problems) {
    if (commonest.get(status)?.text !== text) continue;
    components[`Problem${status}`] ??= JSON.parse(text) as unknown;
    responses[status] = { $ref: `#/components/responses/Problem${status}` };
  }
}

/** Two schemas, or one when they are the same. */
function eitherOf(a: Json | undefined, b: Json | undefined): Json | undefined {
  if (a === undefined || b === undefined) return a ?? b;
  return JSON.stringify(a) === JSON.stringify(b) ? a : { anyOf: [a, b] };
}

/**
 * /api/users/** and /api/orders/** without a version segment are served by the version
 * that X-API-Version or the vendor Accept names (v1 when neither). Each gets a path item built
 * from its v1 and v2 operations: the header parameter, bodies and answers that are either
 * version's (anyOf where they differ), and each vendor media type with its own version's schema.
 */
export function unversionedPaths(document: Document, versions: readonly number[], vendor: string): void {
  const paths = (document.paths ??= {});
  const mediaOf = (version: number) => `application/vnd.${vendor}.v${version}+json`;
  for (const path of Object.keys(paths)) {
    const rest = /^\/api\/v1(\/(?:users|orders)(?:\/.*)?)$/.exec(path)?.[1];
    if (rest === undefined) continue;
    const unversioned = `/api${rest}`;
    const methods: Record<string, Operation> = {};
    for (const method of Object.keys(paths[path] ?? {})) {
      const byVersion = versions
        .map((version) => ({ version, operation: paths[`/api/v${version}${rest}`]?.[method] }))
        .filter((v): v is { version: number; operation: Operation } => v.operation !== undefined);
      const [first] = byVersion;
      if (first === undefined) continue;
      const copy = structuredClone(first.operation);
      const responses: Record<string, Response> = {};
      const merged: Operation = {
        ...copy,
        tags: [rest.startsWith('/users') ? 'users' : 'orders'],
        summary: `${first.operation.summary ?? method.toUpperCase()} (version from X-API-Version or Accept)`,
        description:
          `${first.operation.description ?? first.operation.summary ?? ''} The version is chosen by the X-API-Version header (${versions.join(' or ')}) or by Accept: ${versions.map(mediaOf).join(' or ')}; v1 when neither is sent. The answer varies with both (Vary: Accept, X-API-Version).`.trim(),
        parameters: [
          ...(copy.parameters ?? []),
          {
            in: 'header',
            name: 'X-API-Version',
            required: false,
            description: `The API version to use (${versions.join(' or ')}); an unknown one is 400`,
            schema: { type: 'string', enum: versions.map(String) },
          },
        ],
        responses,
      };
      delete merged.operationId;
      const bodies = byVersion.map((v) => v.operation.requestBody?.content?.['application/json']?.schema);
      if (copy.requestBody?.content !== undefined) {
        const schema = bodies.reduce<Json | undefined>((acc, s) => eitherOf(acc, s), undefined);
        for (const media of Object.values(copy.requestBody.content)) if (schema !== undefined) media.schema = schema;
        merged.requestBody = copy.requestBody;
      }
      const statuses = new Set(byVersion.flatMap((v) => Object.keys(v.operation.responses ?? {})));
      for (const status of statuses) {
        const answers = byVersion.map((v) => ({ version: v.version, response: v.operation.responses?.[status] }));
        const base = structuredClone(answers.find((a) => a.response !== undefined)?.response);
        if (base === undefined) continue;
        if (base.content !== undefined) {
          const content: Record<string, { schema?: Json }> = {};
          for (const [media, value] of Object.entries(base.content)) {
            if (media.startsWith('application/vnd.')) continue;
            const schema = answers.reduce<Json | undefined>(
              (acc, a) => eitherOf(acc, a.response?.content?.[media]?.schema),
              undefined,
            );
            content[media] = { ...value, ...(schema ? { schema } : {}) };
          }
          for (const { version, response } of answers) {
            const own = response?.content?.[mediaOf(version)];
            if (own !== undefined) content[mediaOf(version)] = own;
          }
          base.content = content;
        }
        responses[status] = base;
      }
      methods[method] = merged;
    }
    paths[unversioned] = methods;
  }
}
