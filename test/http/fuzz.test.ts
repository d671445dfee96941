// docs/api-guide.md#limits-and-time-outs: no input, however hostile, gets a 5xx. Property-based: for every operation of the
// OpenAPI document (every route of every version, and the unversioned /api/users/** and
// /api/orders/** besides), fast-check generates path values, queries, bodies and headers from
// the route's schemas and from adversarial pools (any JSON value at any member, every Unicode
// class, numbers at every edge, deep nesting, huge arrays, garbage headers), and checks every
// answer: below 500, a problem document from 400 on, no exception text. Afterwards a normal
// request still works.
//
// Fixed seed and bounded runs in CI (FUZZ_RUNS, default 1000; FUZZ_SEED, default 20261122).
// A larger local run: FUZZ_RUNS=20000 npx vitest run test/http/fuzz.test.ts
// A failure prints the shrunk counterexample and the seed and path to replay it.
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { createProduct, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { ADMIN, bearer } from '../support/tokens.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 1000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261122);

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  format?: string;
  pattern?: string;
  minLength?: number;
  minItems?: number;
  required?: string[];
  examples?: unknown[];
  exclusiveMinimum?: number;
}

interface Operation {
  method: string;
  path: string;
  params: { name: string; in: 'path' | 'query'; schema: Schema }[];
  body: Schema | undefined;
}

const { app } = await buildTestApp();

function operations(server: FastifyInstance): Operation[] {
  const doc = (
    server as unknown as {
      swagger(): {
        paths: Record<
          string,
          Record<
            string,
            {
              parameters?: { name: string; in: string; schema: Schema }[];
              requestBody?: { content: Record<string, { schema: Schema }> };
            }
          >
        >;
      };
    }
  ).swagger();
  const out: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const params = (op.parameters ?? []).filter((p) => p.in === 'path' || p.in === 'query') as Operation['params'];
      const content = op.requestBody?.content ?? {};
      const body = (content['application/json'] ?? content['application/merge-patch+json'] ?? Object.values(content)[0])
        ?.schema;
      out.push({ method: method.toUpperCase(), path, params, body });
    }
  }
  return out;
}

// ---- adversarial pools ------------------------------------------------------------------------

const edgeNumbers = fc.constantFrom(
  0,
  -0,
  1,
  -1,
  0.5,
  1e308,
  -1e308,
  5e-324,
  2 ** 31,
  2 ** 31 - 1,
  2 ** 53,
  2 ** 53 + 1,
  Number.MAX_SAFE_INTEGER,
  1e21,
  123456789.12345679, // as many digits as a double holds
);
const edgeNumberTexts = fc.constantFrom(
  '-0',
  '1e308',
  '1e309',
  '9007199254740993',
  '99999999999999999999',
  '0x10',
  '1.5',
  ' 1',
  '1 ',
  '+1',
  '-1',
  '0',
  '00',
  '1e2',
  'NaN',
  'Infinity',
  '',
  '%',
  '%00',
  '%zz',
  '..',
  '%2e%2e',
  '1;2',
  '1,2',
);
const nasty = fc.constantFrom(
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\u202e\u202d',
  '\ufeff',
  '😀'.repeat(3),
  '\u0301',
  '​',
  ' ',
  '\t\n',
  '"',
  '\\',
  "'; drop table users; --",
  '<script>',
  '${x}',
  '{{x}}',
  '%s%n',
  '../../etc/passwd',
  'a'.repeat(10_000),
  'é'.repeat(5000),
  '\u{10FFFF}',
  '\r\nX-Injected: 1',
);
const unicodeText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary-ascii', maxLength: 40 }),
  nasty,
);

/** Deep nesting at any member: arrays or objects 60 to 100 000 levels. */
const deep = fc
  .tuple(fc.constantFrom(60, 64, 65, 100, 10_000, 100_000), fc.boolean())
  .map(([depth, arrays]) => ({ __deep: depth, arrays }));

const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: unicodeText },
  { weight: 2, arbitrary: edgeNumbers },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: deep },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      [],
      {},
      Array.from({ length: 5000 }, (_, i) => i),
      Array.from({ length: 2000 }, () => ({ productId: 1, quantity: 1 })),
    ),
  },
);

/** A value for a schema: mostly of the right shape, often not. */
function valueFor(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (schema === undefined || depth > 4) return anyJson;
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) return fc.oneof(...branches.map((b) => valueFor(b, depth + 1)), anyJson);
  if (schema.enum) return fc.oneof(fc.constantFrom(...schema.enum), anyJson);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  const right: fc.Arbitrary<unknown> = (() => {
    switch (type) {
      case 'object':
        return objectFor(schema, depth);
      case 'array':
        return fc.array(valueFor(schema.items, depth + 1), { maxLength: 4 });
      case 'integer':
        return fc.oneof(
          fc.integer({ min: schema.minimum ?? -10, max: Math.min(schema.maximum ?? 1000, 1000) }),
          fc.integer(),
          edgeNumbers,
        );
      case 'number':
        return fc.oneof(fc.double({ noNaN: true }), edgeNumbers, fc.constantFrom(19.99, 0.01, 0.001, 10.005));
      case 'string':
        return schema.format === 'email'
          ? fc.oneof(
              fc.emailAddress(),
              unicodeText.map((s) => `${s}@example.com`),
            )
          : unicodeText;
      case 'boolean':
        return fc.boolean();
      default:
        return anyJson;
    }
  })();
  return fc.oneof({ weight: 4, arbitrary: right }, { weight: 1, arbitrary: anyJson });
}

function objectFor(schema: Schema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = schema.properties ?? {};
  const known = Object.fromEntries(Object.entries(props).map(([k, s]) => [k, valueFor(s, depth + 1)]));
  return fc
    .tuple(
      fc.record(known, { requiredKeys: [] }),
      fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), nasty), anyJson, { maxKeys: 2 }),
    )
    .map(([a, extra]) => ({ ...extra, ...a }));
}

// ---- a valid body, then one member broken --------------------------------------------------

let unique = 0;
const ids: Record<string, number> = {};

/** A value the schema accepts (examples first), so that a mutated body reaches the handler. */
function validFor(schema: Schema | undefined, name = ''): unknown {
  if (schema === undefined) return {};
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) return validFor(branches.find((b) => b.type !== 'null') ?? branches[0], name);
  if (schema.enum) return schema.enum[0];
  if (schema.examples?.length) {
    const example = schema.examples[0];
    return typeof example === 'string' && schema.format === 'email' ? `fuzz${unique++}@example.com` : example;
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'object':
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, s]) => [k, validFor(s, k)]));
    case 'array':
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => validFor(schema.items, name));
    case 'integer':
      return (
        ids[name] ??
        Math.max(1, (schema.minimum ?? schema.exclusiveMinimum ?? 0) + (schema.exclusiveMinimum === undefined ? 0 : 1))
      );
    case 'number':
      return 19.99;
    case 'boolean':
      return true;
    case 'string': {
      if (schema.format === 'email') return `fuzz${unique++}@example.com`;
      const candidates = ['Fuzz value', 'correct horse battery', '10115', 'PENDING', `SKU-FUZZ-${unique++}`];
      const pattern = schema.pattern === undefined ? undefined : new RegExp(schema.pattern);
      return (
        candidates.find((c) => (pattern === undefined || pattern.test(c)) && c.length >= (schema.minLength ?? 0)) ??
        'x'.repeat(schema.minLength ?? 1)
      );
    }
    default:
      return null;
  }
}

/** Every member path of a value: ['a'], ['a', 'b'], ['items', 0, 'quantity'] … */
function memberPaths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => [[...prefix, i], ...memberPaths(v, [...prefix, i])]);
  if (value !== null && typeof value === 'object')
    return Object.entries(value).flatMap(([k, v]) => [[...prefix, k], ...memberPaths(v, [...prefix, k])]);
  return [];
}

function withMember(value: unknown, path: (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const copy = (Array.isArray(value) ? [...(value as unknown[])] : { ...(value as object) }) as Record<
    string | number,
    unknown
  >;
  copy[path[0]!] = withMember(copy[path[0]!], path.slice(1), replacement);
  return copy;
}

/** A valid body with one member (or none) replaced by an adversarial value. */
function mutatedBody(schema: Schema): fc.Arbitrary<unknown> {
  return fc.constant(null).chain(() => {
    const base = validFor(schema);
    const paths = memberPaths(base);
    if (paths.length === 0) return fc.constant(base);
    return fc
      .tuple(fc.integer({ min: 0, max: paths.length }), fc.oneof(nasty, anyJson, edgeNumbers, deep))
      .map(([i, v]) => (i === paths.length ? base : withMember(base, paths[i]!, v)));
  });
}

/** Text for a path or query value: typed values, edge texts, and any Unicode. */
function textFor(schema: Schema): fc.Arbitrary<string> {
  return fc.oneof(
    valueFor(schema).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))),
    edgeNumberTexts,
    unicodeText,
  );
}

/** Percent-encodes any string byte by byte (lone surrogates too), or leaves it raw. */
function encode(text: string, raw: boolean): string {
  if (raw) return text.replace(/[\s#?/]/g, '');
  return [...Buffer.from(text)]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`,
    )
    .join('');
}

/** Expands the deep-nesting markers into real JSON text, without recursion. */
function serialize(body: unknown): string {
  return JSON.stringify(body, (_key, value: unknown) => {
    if (value !== null && typeof value === 'object' && '__deep' in value) {
      const { __deep: depth, arrays } = value as { __deep: number; arrays: boolean };
      return { __placeholder: `${(arrays ? '[' : '{"a":').repeat(depth)}1${(arrays ? ']' : '}').repeat(depth)}` };
    }
    return value;
  }).replace(/\{"__placeholder":"([^"]*)"\}/g, (_m, text: string) => text.replace(/\\"/g, '"'));
}

const garbageHeader = fc.oneof(
  unicodeText.map((s) => s.replace(/[^\x20-\x7e]/g, '')),
  fc.constantFrom(
    '',
    '*',
    '"1"',
    'W/"1"',
    '"1", "2"',
    '*/*',
    'application/json',
    'application/vnd.resource-api.v9+json',
    'text/html;q=0',
    'Bearer',
    'Bearer x.y.z',
    'Basic YTpi',
    '1',
    '2',
    '99',
    'v1',
    'application/json; charset=latin1',
    'application/merge-patch+json',
    'multipart/form-data; boundary=x',
  ),
);

const HEADER_NAMES = [
  'accept',
  'content-type',
  'if-match',
  'if-none-match',
  'idempotency-key',
  'authorization',
  'x-api-version',
  'x-request-id',
  'origin',
] as const;

// ---- the property ---------------------------------------------------------------------------

const EXCEPTION_TEXT =
  /Maximum call stack|TypeError|ReferenceError|RangeError|SyntaxError|Cannot read|is not a function|undefined is not|\n\s+at |FST_|Internal Server Error|postgres|PGlite|SQLSTATE|violates|syntax error/i;

describe('hostile input never gets a 5xx', async () => {
  // Some data, so that ids hit real rows as well as missing ones.
  const user = await createUser(app);
  const product = await createProduct(app, {}, 1000);
  const customer = await bearer({ sub: String(user.id), scope: 'orders:read orders:write users:read users:write' });
  await app.inject({
    method: 'POST',
    url: '/api/v1/orders',
    headers: { authorization: customer },
    payload: { productId: product.id, quantity: 1 },
  });
  const ops = operations(app);
  Object.assign(ids, { productId: product.id, customerId: user.id, id: user.id });

  it('covers every operation of the document', () => {
    expect(ops.length).toBeGreaterThan(30);
  });

  it(`answers below 500 with a problem document from 400 on (${RUNS} runs, seed ${SEED})`, async () => {
    const request = fc.integer({ min: 0, max: ops.length - 1 }).chain((index) => {
      const op = ops[index]!;
      const pathValues = op.params
        .filter((p) => p.in === 'path')
        .map((p) =>
          fc.oneof(
            { weight: 2, arbitrary: fc.constantFrom(String(user.id), String(product.id), '1') },
            { weight: 3, arbitrary: textFor(p.schema) },
          ),
        );
      const query = fc.record(
        Object.fromEntries(op.params.filter((p) => p.in === 'query').map((p) => [p.name, textFor(p.schema)])),
        { requiredKeys: [] },
      );
      return fc.record({
        op: fc.constant(op),
        pathValues: fc.tuple(...pathValues),
        rawPath: fc.boolean(),
        unversioned: fc.boolean(),
        query,
        extraQuery: fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 10 }), { maxKeys: 2 }),
        body: fc.oneof(
          { weight: 6, arbitrary: op.body === undefined ? anyJson : mutatedBody(op.body) },
          { weight: 3, arbitrary: op.body === undefined ? anyJson : valueFor(op.body) },
          { weight: 1, arbitrary: unicodeText },
          { weight: 1, arbitrary: fc.constant(undefined) },
        ),
        bodyAsText: fc.boolean(),
        headers: fc.oneof(
          fc.constant({}),
          fc.record(Object.fromEntries(HEADER_NAMES.map((h) => [h, garbageHeader])), { requiredKeys: [] }),
        ),
        asCustomer: fc.boolean(),
      });
    });

    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        let path = r.op.path;
        r.op.params
          .filter((p) => p.in === 'path')
          .forEach((p, i) => (path = path.replace(`{${p.name}}`, encode(r.pathValues[i]!, r.rawPath))));
        if (r.unversioned) path = path.replace(/^\/api\/v\d+\/(users|orders)/, '/api/$1');
        const q = new URLSearchParams();
        for (const [k, v] of Object.entries({ ...r.extraQuery, ...r.query })) q.append(k, v as string);
        const url = `${path}${q.size > 0 ? `?${q.toString()}` : ''}`;
        const payload =
          r.body === undefined ? undefined : r.bodyAsText && typeof r.body === 'string' ? r.body : serialize(r.body);
        const headers: Record<string, string> = {
          authorization: r.asCustomer ? customer : ADMIN,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          ...(r.headers as Record<string, string>),
          // The event stream never ends on its own, and inject waits for the end: its route is
          // fuzzed with every input but the one that opens a stream.
          ...(r.op.path === '/api/v1/events' ? { accept: 'application/json' } : {}),
        };
        const response = await app.inject({
          method: r.op.method as 'GET',
          url,
          headers,
          ...(payload === undefined ? {} : { payload }),
        });
        const where = `${r.op.method} ${url} → ${response.statusCode} ${response.body.slice(0, 300)}`;
        expect(response.statusCode, where).toBeLessThan(500);
        expect(response.body, where).not.toMatch(EXCEPTION_TEXT);
        if (response.statusCode >= 400) {
          expect(response.headers['content-type'], where).toMatch(/^application\/problem\+json/);
          const problem = response.json<{ status: number; title: string; type: string }>();
          expect(problem.status, where).toBe(response.statusCode);
          expect(typeof problem.title, where).toBe('string');
          expect(typeof problem.type, where).toBe('string');
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: false, verbose: fc.VerbosityLevel.Verbose },
    );
  }, 600_000);

  it('still answers normal requests afterwards', async () => {
    const created = await createUser(app);
    const response = await app.inject({
      method: 'GET',
      url: `/api/v1/users/${created.id}`,
      headers: { authorization: ADMIN },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(created);
    const ready = await app.inject({ method: 'GET', url: '/api/public/health/ready' });
    expect(ready.statusCode).toBe(200);
  });
});
