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

export const IdParamSchema = Type.Object({ id: Id() });
export type IdParam = Static<typeof IdParamSchema>;

/** spec 2.4: the page envelope every paging list returns. */
export const Page = <T extends TSchema>(element: T) =>
  Type.Object({
    content: Type.Array(element),
    totalElements: Type.Integer({ minimum: 0 }),
    totalPages: Type.Integer({ minimum: 0 }),
    number: Type.Integer({ minimum: 0, description: 'zero-based index of this page' }),
    size: Type.Integer({ minimum: 1 }),
    first: Type.Boolean(),
    last: Type.Boolean(),
  });

/** spec 7.1: every error response. Extension members vary by case and are listed per form. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'about:blank, or {error_type_base}/<slug> for typed errors' }),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    instance: Type.String({ description: 'the request path' }),
    errors: Type.Optional(
      Type.Array(
        Type.Union([
          Type.Object({
            field: Type.String(),
            message: Type.String(),
            rejected: Type.Union([Type.String(), Type.Null()]),
          }),
          Type.String(),
        ]),
        {
          description: 'v1 validation failures: objects (users) or "<field>: <message>" strings (orders)',
        },
      ),
    ),
    fieldErrors: Type.Optional(
      Type.Array(Type.Object({ field: Type.String(), message: Type.String() }), {
        description: 'typed validation failures',
      }),
    ),
    conflictingField: Type.Optional(Type.String()),
    requestId: Type.Optional(Type.String({ description: '500 only: matches the server log entry' })),
  },
  { additionalProperties: true, title: 'Problem', description: 'RFC 9457 problem document (application/problem+json)' },
);

/** A response with no body (204, 202). */
export const NoContentSchema = Type.Unsafe<undefined>({ description: 'No content' });

/** OpenAPI entries for the problems a route can answer with (spec 7). */
export function problemResponses(...statuses: number[]) {
  const out: Record<
    number,
    { description: string; content: { 'application/problem+json': { schema: typeof ProblemSchema } } }
  > = {};
  for (const status of statuses)
    out[status] = {
      description: `Problem (${status})`,
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

/** spec 2.1: exactly five digits, with the spec's own message. */
export const PostalCode = () =>
  Type.String({ pattern: '^[0-9]{5}$', 'x-message': 'must be a 5-digit postal code', examples: ['10115'] });

/** An instant: ISO 8601 with Z, e.g. 2026-11-21T22:34:23.123Z. */
export const Instant = (description = 'ISO 8601 instant (UTC)') =>
  Type.String({ format: 'date-time', description, examples: ['2026-11-21T22:34:23.123Z'] });

/** page and size of a list: size above 100 is served as 100. */
export const PageParams = {
  page: Type.Integer({ minimum: 0, maximum: 10_000_000, default: 0, description: 'zero-based page index' }),
  size: Type.Integer({ minimum: 1, default: 20, description: 'page size; values above 100 are treated as 100' }),
};
