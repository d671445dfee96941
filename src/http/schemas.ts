// Shared wire pieces (STYLE principle 4): defined once, used for validation, serialization,
// OpenAPI and types.
import { Type, type Static, type TSchema } from 'typebox';
import { NOT_BLANK_PATTERN } from './problems/field-errors.js';

/** A string that must contain a non-blank character (Bean Validation @NotBlank). */
export const NotBlank = (
  options: { minLength?: number; maxLength?: number; writeOnly?: boolean; description?: string } = {},
) => Type.String({ pattern: NOT_BLANK_PATTERN, ...options });

/** @NotBlank @Email: blank and format are separate rules, as in Hibernate Validator. */
export const NotBlankEmail = () =>
  Type.String({ pattern: NOT_BLANK_PATTERN, format: 'email', maxLength: 320, examples: ['ada@example.com'] });

/** A positive 64-bit id that JavaScript holds exactly. */
export const Id = (description = 'Numeric identifier') =>
  Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description });

/** A count or index: from 0 to the largest integer JavaScript holds exactly. */
export const Count = (description?: string) =>
  Type.Integer({
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    ...(description ? { description } : {}),
  });

/** A string the service sends and never longer than the rule that admitted it. */
export const Text = (maxLength: number, options: { description?: string; examples?: string[] } = {}) =>
  Type.String({ maxLength, ...options });

/** The most members a list answer or a problem's error list holds. */
export const PAGE_SIZE_MAX = 100;

export const IdParamSchema = Type.Object({ id: Id() });
export type IdParam = Static<typeof IdParamSchema>;

/** The page envelope every paging list returns. */
export const Page = <T extends TSchema>(element: T, title: string) =>
  Type.Object(
    {
      content: Type.Array(element, { maxItems: PAGE_SIZE_MAX }),
      totalElements: Count(),
      totalPages: Count(),
      number: Count('zero-based index of this page'),
      size: Type.Integer({ minimum: 1, maximum: PAGE_SIZE_MAX }),
      first: Type.Boolean(),
      last: Type.Boolean(),
    },
    { title },
  );

// Bounds of what a problem can hold: a path is at most what Node reads as a request head, a
// rejected value at most the body that held it, and validation stops listing after ERRORS_MAX.
const URL_MAX = 16_384;
const BODY_MAX = 1_048_576;
const FIELD_MAX = 1_000;
const MESSAGE_MAX = 1_000;
/** The most field errors a problem lists (a body can break more rules; the first are listed). */
export const ERRORS_MAX = 1_000;

/** Every error response. Extension members vary by case and are listed per form. */
export const ProblemSchema = Type.Object(
  {
    type: Text(2048, { description: 'about:blank, or {error_type_base}/<slug> for typed errors' }),
    title: Text(200),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    detail: Text(URL_MAX),
    instance: Text(URL_MAX, { description: 'the request path' }),
    errors: Type.Optional(
      Type.Array(
        Type.Union([
          Type.Object({
            field: Text(FIELD_MAX),
            message: Text(MESSAGE_MAX),
            rejected: Type.Union([Text(BODY_MAX), Type.Null()]),
          }),
          Text(FIELD_MAX + MESSAGE_MAX + 2),
        ]),
        {
          maxItems: ERRORS_MAX,
          description: 'v1 validation failures: objects (users) or "<field>: <message>" strings (orders)',
        },
      ),
    ),
    fieldErrors: Type.Optional(
      Type.Array(Type.Object({ field: Text(FIELD_MAX), message: Text(MESSAGE_MAX) }), {
        maxItems: ERRORS_MAX,
        description: 'typed validation failures',
      }),
    ),
    conflictingField: Type.Optional(Text(FIELD_MAX)),
    requestId: Type.Optional(Text(200, { description: '500 only: matches the server log entry' })),
  },
  { additionalProperties: true, title: 'Problem', description: 'RFC 9457 problem document (application/problem+json)' },
);

/** A response with no body (204, 202). */
export const NoContentSchema = Type.Unsafe<undefined>({ description: 'No content' });

/** What a problem of each status means, as the OpenAPI document describes it. */
const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  400: 'Bad Request: the URL, a parameter or the body is not valid',
  401: 'Unauthorized: no valid Bearer token',
  403: 'Forbidden: the token lacks the scope, or the resource is not the caller’s',
  404: 'Not Found: no such resource, or not one the caller may see',
  406: 'Not Acceptable: Accept names no media type this operation answers with',
  409: 'Conflict: the resource’s state or a unique value forbids the change',
  412: 'Precondition Failed: If-Match names a version the resource is no longer at',
  413: 'Content Too Large: the body is over 1 MiB',
  415: 'Unsupported Media Type: the body is not JSON',
  422: 'Unprocessable Content: the request is well formed but a business rule refuses it',
  500: 'Internal Server Error: the problem carries a requestId for the server log',
  503: 'Service Unavailable: the database is unreachable or the request ran out of time; retry after Retry-After',
};

/** OpenAPI entries for the problems a route can answer with. */
export function problemResponses(...statuses: number[]) {
  const out: Record<
    number,
    { description: string; content: { 'application/problem+json': { schema: typeof ProblemSchema } } }
  > = {};
  for (const status of statuses)
    out[status] = {
      description: PROBLEM_DESCRIPTIONS[status] ?? `Problem (${String(status)})`,
      content: { 'application/problem+json': { schema: ProblemSchema } },
    };
  return out;
}

/**
 * A member that may also be null, as one JSON Schema type list ({ type: ['object', 'null'] })
 * rather than anyOf, so that validation reports the member's own rules.
 */
export const Nullable = <T extends TSchema>(schema: T) =>
  Type.Unsafe<Static<T> | null>({ ...schema, type: [(schema as unknown as { type: string }).type, 'null'] });

/** Exactly five digits, with the spec's own message. */
export const PostalCode = () =>
  Type.String({
    pattern: '^[0-9]{5}$',
    maxLength: 5,
    'x-message': 'must be a 5-digit postal code',
    examples: ['10115'],
  });

/** An instant: ISO 8601 with Z, e.g. 2026-11-21T22:34:23.123Z. */
export const Instant = (description = 'ISO 8601 instant (UTC)') =>
  Type.String({ format: 'date-time', maxLength: 30, description, examples: ['2026-11-21T22:34:23.123Z'] });

/** A list cursor: base64url payload, '.', a 16-byte signature (http/paging/pagination.ts). */
export const CURSOR_PATTERN = '^[A-Za-z0-9_-]{1,1000}\\.[A-Za-z0-9_-]{22}$';

/** `cursor` of a list whose Link carries seek cursors (users, orders). */
export const CursorParam = () =>
  Type.Optional(
    Type.String({
      maxLength: 1023,
      pattern: CURSOR_PATTERN,
      'x-message': 'is not a valid cursor: use the one in the Link header as it is',
      description:
        'Opaque; set by the `prev` and `next` links. With it the page is found by seeking from the ' +
        'row next to it (fast at any depth; no row skipped or repeated while rows are added or ' +
        'removed). Bound to the list, its sort and filters, page and size: any other use is a 400.',
    }),
  );

/** The body of an action that reads none: an empty body, or none, is fine (docs/api-guide.md#orders). */
export const EmptyBodySchema = Type.Object({}, { description: 'No members are read; the body may be empty.' });

/** page and size of a list: size above 100 is served as 100. */
export const PageParams = {
  page: Type.Integer({
    minimum: 0,
    maximum: 10_000_000,
    default: 0,
    description: 'zero-based page index',
  }),
  size: Type.Integer({
    minimum: 1,
    maximum: Number.MAX_SAFE_INTEGER,
    default: 20,
    description: 'page size; values above 100 are treated as 100',
  }),
};
