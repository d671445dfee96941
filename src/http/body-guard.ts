// What a JSON body may not carry, whatever the route (docs/api-guide.md#limits-and-time-outs): nesting deeper than 64 levels
// (refused before JSON.parse, so no schema, handler or error renderer ever recurses into it),
// and strings that PostgreSQL text cannot hold as sent: U+0000, and unpaired UTF-16
// surrogates, which would be stored as U+FFFD and so silently change the data.
import { InvalidFields, type FieldError } from './problems/field-errors.js';

export const MAX_BODY_DEPTH = 64;

/** A body refused before any schema saw it: the problem handler renders it as a 400. */
export class BodyTooDeep extends Error {
  override readonly name = 'BodyTooDeep';
  readonly code = 'RESOURCE_API_BODY_TOO_DEEP';
  readonly statusCode = 400;
  constructor() {
    super(`The request body is nested deeper than ${MAX_BODY_DEPTH} levels.`);
  }
}

/** Values the schema would accept but the database cannot store as sent: field errors. */
export class UnstorableInput extends InvalidFields {
  override readonly name = 'UnstorableInput';
  readonly code = 'RESOURCE_API_UNSTORABLE_INPUT';
  constructor(fieldErrors: FieldError[]) {
    super(fieldErrors, 'The request carries characters that cannot be stored.');
  }
}

/** True when arrays and objects in the JSON text nest deeper than `max`. Linear; strings skipped. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: skip to its closing quote, stepping over escapes.
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

// In JSON text, NUL and surrogates can only arrive escaped (raw control characters are invalid
// JSON, and UTF-8 decoding never yields a lone surrogate): a cheap test before any walk.
const MAYBE_UNSTORABLE = /\\u(?:0000|[dD][89a-fA-F])/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function mayHoldUnstorable(text: string): boolean {
  return MAYBE_UNSTORABLE.test(text);
}

/** Why a string cannot be stored as sent, or undefined when it can. */
export function unstorable(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain NUL characters';
  if (LONE_SURROGATE.test(value)) return 'must not contain unpaired surrogates';
  return undefined;
}

/** Every string in a parsed value that cannot be stored, as field errors (`a.b[0].c`). */
export function unstorableFields(value: unknown): FieldError[] {
  const out: FieldError[] = [];
  const walk = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      const message = unstorable(v);
      if (message !== undefined) out.push({ field: path, message, rejected: v });
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, `${path}[${i}]`));
    } else if (v !== null && typeof v === 'object') {
      for (const [key, item] of Object.entries(v)) walk(item, path === '' ? key : `${path}.${key}`);
    }
  };
  walk(value, '');
  return out.sort((a, b) => (a.field < b.field ? -1 : a.field > b.field ? 1 : 0));
}
