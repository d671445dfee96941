// Request validation with ajv, compiled once per route at start-up. Bodies are validated
// strictly (a number is never a string: docs/api-guide.md#users), while path and query values, which
// arrive as text, are coerced. allErrors is on so that every violated constraint is listed
//; bodies are capped at 1 MiB and arrays carry maxItems, which bounds its cost.
import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

// Hibernate Validator's @Email: dot-atom local part up to 64 characters, domain labels up to
// 63 (a single label is allowed), or an address literal. "" is valid here, as there: the
// blank rule reports it, not the format rule (docs/api-guide.md#users).
const ATOM = "[a-z0-9!#$%&'*+/=?^_`{|}~\\u0080-\\uffff-]+";
const LABEL = '[a-z0-9\\u0080-\\uffff](?:[a-z0-9\\u0080-\\uffff-]{0,61}[a-z0-9\\u0080-\\uffff])?';
const EMAIL = new RegExp(`^(${ATOM}(?:\\.${ATOM})*)@(${LABEL}(?:\\.${LABEL})*|\\[[0-9a-f.:]+\\])$`, 'i');

export function isEmail(value: string): boolean {
  if (value === '') return true;
  const match = EMAIL.exec(value);
  if (match === null) return false;
  const [, local = '', domain = ''] = match;
  return local.length <= 64 && domain.length <= 255;
}

/**
 * `multipleOf` without binary rounding: a step of 10^-n (a price's 0.01) holds when the number
 * is the double nearest to a decimal of n places, which `toFixed(n)` finds exactly at every
 * magnitude. Dividing, as ajv does, fails valid prices (19.99 / 0.01 is 1998.9999999999998; with
 * a tolerance, 1234567.89 still fails); other steps divide, to within 1e-9.
 */
function isMultipleOf(step: number, value: number): boolean {
  const places = -Math.log10(step);
  if (Number.isInteger(places) && places > 0 && places <= 20) return Number(value.toFixed(places)) === value;
  const quotient = value / step;
  return Math.abs(Math.round(quotient) - quotient) <= 1e-9;
}

function createAjv(options: Options): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    verbose: true,
    useDefaults: true,
    removeAdditional: false,
    strict: true,
    allowUnionTypes: true, // nullable members are { type: ['string', 'null'] }
    ...options,
  });
  addFormats(ajv, { mode: 'full', keywords: false });
  ajv.addFormat('email', { type: 'string', validate: isEmail });
  // Annotations our schemas carry: an error message for a rule, and OpenAPI's own words.
  ajv.addKeyword({ keyword: 'x-message', schemaType: 'string' });
  ajv.addVocabulary(['example']);
  ajv.removeKeyword('multipleOf');
  ajv.addKeyword({ keyword: 'multipleOf', type: 'number', schemaType: 'number', validate: isMultipleOf });
  return ajv;
}

/** One compiler for every route: strict for bodies, coercing for params, query and headers. */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const body = createAjv({ coerceTypes: false });
  const text = createAjv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) =>
    finiteOnly((httpPart === 'body' ? body : text).compile(schema as object), schema as SchemaNode);
}

interface SchemaNode {
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
}

type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

/**
 * ajv lets a non-finite number through: "1e309" in a path or query coerces to Infinity and
 * passes `integer` and `maximum`, and 1e309 in a body parses to Infinity. Neither can be
 * stored (docs/api-guide.md#limits-and-time-outs), so a valid value holding one is reported as a type error of its member.
 */
function finiteOnly(validate: Validate, schema: SchemaNode): Validate {
  const wrapped: Validate = (data) => {
    if (!validate(data)) {
      wrapped.errors = validate.errors ?? null;
      return false;
    }
    const found = nonFinite(data, schema);
    if (found === undefined) {
      wrapped.errors = null;
      return true;
    }
    wrapped.errors = [typeError(found)];
    return false;
  };
  return wrapped;
}

interface NonFinite {
  path: string;
  value: number;
  schema: SchemaNode | undefined;
}

/** The first non-finite number in `value`, with its JSON Pointer (built only when one is found). */
function nonFinite(value: unknown, schema: SchemaNode | undefined): NonFinite | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path: '', value, schema };
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nonFinite(value[i], schema?.items);
      if (found !== undefined) return { ...found, path: `/${i}${found.path}` };
    }
    return undefined;
  }
  const object = value as Record<string, unknown>;
  for (const key of Object.keys(object)) {
    const found = nonFinite(object[key], schema?.properties?.[key]);
    if (found !== undefined) return { ...found, path: `/${key.replace(/~/g, '~0').replace(/\//g, '~1')}${found.path}` };
  }
  return undefined;
}

/** ajv's type error for a non-finite number where the schema wants a number. */
function typeError({ path, value, schema }: NonFinite): ErrorObject {
  const type = [schema?.type ?? 'number'].flat().find((t) => t !== 'null') ?? 'number';
  return {
    keyword: 'type',
    instancePath: path,
    schemaPath: '#/type',
    params: { type },
    message: `must be ${type}`,
    data: value,
    parentSchema: schema ?? {},
  } as ErrorObject;
}
