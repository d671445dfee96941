// ajv errors → the field errors of the v1 problem forms (docs/api-guide.md#errors), with the Bean Validation default messages the
// spec's clients already know (docs/api-guide.md#users). Pure; unit-tested in field-errors.test.ts.
import type { ErrorObject } from 'ajv';

export interface FieldError {
  field: string;
  message: string;
  /** The rejected value as a string; null when absent, null, or write-only (passwords). */
  rejected: string | null;
}

/**
 * Field errors found after the schema passed (a value the database cannot store, a cursor that
 * does not verify): a 400 in the route's validation form, like a schema's own.
 */
export class InvalidFields extends Error {
  readonly statusCode = 400;
  constructor(
    readonly fieldErrors: FieldError[],
    message: string,
  ) {
    super(message);
  }
}

/** The pattern that marks a string "not blank"; see NotBlank() in http/schemas.ts. */
export const NOT_BLANK_PATTERN = '\\S';

interface SchemaLike {
  type?: string | string[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  writeOnly?: boolean;
  enum?: unknown[];
  properties?: Record<string, SchemaLike>;
  'x-message'?: string;
}

const TYPE_MESSAGES: Record<string, string> = {
  string: 'must be a string',
  integer: 'must be an integer',
  number: 'must be a number',
  boolean: 'must be a boolean',
  object: 'must be an object',
  array: 'must be an array',
};

/**
 * Translates every ajv error (ajv must run with allErrors and verbose) into field errors,
 * deduplicated and sorted by field, then message. Returns undefined when the error is about
 * the value as a whole (a body that is not an object), which is not a field's failure.
 */
export function toFieldErrors(
  errors: readonly ErrorObject[],
  raw?: Record<string, string | undefined>,
): FieldError[] | undefined {
  const out = new Map<string, FieldError>();
  for (const error of errors) {
    const e = toFieldError(error, raw);
    if (e === undefined) continue;
    if (e === 'root') return undefined;
    out.set(`${e.field}\u0000${e.message}`, e);
  }
  return [...out.values()].sort((a, b) => compare(a.field, b.field) || compare(a.message, b.message));
}

function toFieldError(
  error: ErrorObject,
  raw: Record<string, string | undefined> | undefined,
): FieldError | 'root' | undefined {
  const schema = (error.parentSchema ?? {}) as SchemaLike;
  const path = toFieldPath(error.instancePath);

  if (error.keyword === 'required') {
    const name = (error.params as { missingProperty: string }).missingProperty;
    const property = schema.properties?.[name];
    return { field: join(path, name), message: missingMessage(property), rejected: null };
  }
  // Branch errors of anyOf/oneOf repeat what the branches said; the branches speak for them.
  if (error.keyword === 'anyOf' || error.keyword === 'oneOf' || error.keyword === 'if') return undefined;
  if (path === '' && error.keyword === 'type') return 'root';

  const value: unknown = error.data;
  const sent = raw !== undefined && Object.hasOwn(raw, path) ? raw[path] : undefined;
  const rejected = schema.writeOnly ? null : (sent ?? show(value));
  return { field: path, message: messageFor(error, schema, value), rejected };
}

function messageFor(error: ErrorObject, schema: SchemaLike, value: unknown): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'type':
      if (value === null) return missingMessage(schema);
      return TYPE_MESSAGES[String(params.type).split(',')[0] ?? ''] ?? `must be ${String(params.type)}`;
    case 'minLength':
    case 'maxLength':
      return (
        schema['x-message'] ?? `size must be between ${schema.minLength ?? 0} and ${schema.maxLength ?? 2147483647}`
      );
    case 'minItems':
      return schema['x-message'] ?? `size must be between ${schema.minItems ?? 0} and ${schema.maxItems ?? 2147483647}`;
    case 'maxItems':
      return `size must be between ${schema.minItems ?? 0} and ${schema.maxItems ?? 2147483647}`;
    case 'pattern':
      return schema.pattern === NOT_BLANK_PATTERN
        ? 'must not be blank'
        : (schema['x-message'] ?? `must match "${String(params.pattern)}"`);
    case 'format':
      if (params.format === 'email') return 'must be a well-formed email address';
      return schema['x-message'] ?? `must be a valid ${String(params.format)}`;
    case 'minimum':
      return `must be greater than or equal to ${String(params.limit)}`;
    case 'exclusiveMinimum':
      return `must be greater than ${String(params.limit)}`;
    case 'maximum':
      return `must be less than or equal to ${String(params.limit)}`;
    case 'exclusiveMaximum':
      return `must be less than ${String(params.limit)}`;
    case 'enum':
      return schema['x-message'] ?? `must be one of ${(schema.enum ?? []).map(String).join(', ')}`;
    default:
      return schema['x-message'] ?? error.message ?? 'is invalid';
  }
}

/** Missing or null: a not-blank string is "blank"; anything else is "null" (Bean Validation). */
function missingMessage(schema: SchemaLike | undefined): string {
  return schema?.pattern === NOT_BLANK_PATTERN ? 'must not be blank' : 'must not be null';
}

/** "/address/postalCode" → "address.postalCode"; "/items/0/quantity" → "items[0].quantity". */
export function toFieldPath(instancePath: string): string {
  let out = '';
  for (const raw of instancePath.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(segment) ? `[${segment}]` : out === '' ? segment : `.${segment}`;
  }
  return out;
}

function join(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

function show(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return JSON.stringify(value);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
