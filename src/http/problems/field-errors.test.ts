import type { ErrorObject } from 'ajv';
import { describe, expect, it } from 'vitest';
import { toFieldErrors, toFieldPath } from './field-errors.js';

const notBlank = { type: 'string', pattern: '\\S', minLength: 2, maxLength: 100 };
const err = (e: Partial<ErrorObject>): ErrorObject =>
  ({ keyword: 'type', instancePath: '', schemaPath: '#', params: {}, ...e }) as ErrorObject;

describe('toFieldPath', () => {
  it.each([
    ['', ''],
    ['/name', 'name'],
    ['/address/postalCode', 'address.postalCode'],
    ['/items/0/quantity', 'items[0].quantity'],
    ['/a~1b/c~0d', 'a/b.c~d'],
  ])('%s → %s', (path, field) => expect(toFieldPath(path)).toBe(field));
});

describe('toFieldErrors', () => {
  it('reports a missing not-blank string as blank and any other missing field as null', () => {
    const parent = { type: 'object', properties: { name: notBlank, age: { type: 'integer' } } };

    const errors = toFieldErrors([
      err({ keyword: 'required', params: { missingProperty: 'name' }, parentSchema: parent }),
      err({ keyword: 'required', params: { missingProperty: 'age' }, parentSchema: parent }),
    ]);

    expect(errors).toEqual([
      { field: 'age', message: 'must not be null', rejected: null },
      { field: 'name', message: 'must not be blank', rejected: null },
    ]);
  });

  it('nests required fields under their parent path', () => {
    const parent = { type: 'object', properties: { postalCode: notBlank } };

    expect(
      toFieldErrors([
        err({
          keyword: 'required',
          instancePath: '/address',
          params: { missingProperty: 'postalCode' },
          parentSchema: parent,
        }),
      ]),
    ).toEqual([{ field: 'address.postalCode', message: 'must not be blank', rejected: null }]);
  });

  it('uses the Bean Validation messages for ranges and sizes', () => {
    const errors = toFieldErrors([
      err({ keyword: 'minimum', instancePath: '/age', params: { limit: 18 }, parentSchema: { minimum: 18 }, data: 17 }),
      err({
        keyword: 'maximum',
        instancePath: '/age',
        params: { limit: 120 },
        parentSchema: { maximum: 120 },
        data: 121,
      }),
      err({ keyword: 'exclusiveMinimum', instancePath: '/quantity', params: { limit: 0 }, parentSchema: {}, data: 0 }),
      err({ keyword: 'maxLength', instancePath: '/note', params: {}, parentSchema: { maxLength: 500 }, data: 'x' }),
    ]);

    expect(errors).toEqual([
      { field: 'age', message: 'must be greater than or equal to 18', rejected: '17' },
      { field: 'age', message: 'must be less than or equal to 120', rejected: '121' },
      { field: 'note', message: 'size must be between 0 and 500', rejected: 'x' },
      { field: 'quantity', message: 'must be greater than 0', rejected: '0' },
    ]);
  });

  it('uses a schema x-message for a pattern, and never shows write-only values', () => {
    const errors = toFieldErrors([
      err({
        keyword: 'pattern',
        instancePath: '/address/postalCode',
        params: { pattern: '^\\d{5}$' },
        parentSchema: { pattern: '^\\d{5}$', 'x-message': 'must be a 5-digit postal code' },
        data: '123',
      }),
      err({
        keyword: 'minLength',
        instancePath: '/password',
        params: {},
        parentSchema: { minLength: 8, maxLength: 72, writeOnly: true },
        data: 'short',
      }),
    ]);

    expect(errors).toEqual([
      { field: 'address.postalCode', message: 'must be a 5-digit postal code', rejected: '123' },
      { field: 'password', message: 'size must be between 8 and 72', rejected: null },
    ]);
  });

  it('deduplicates and sorts by field, then message', () => {
    const e = err({ keyword: 'pattern', instancePath: '/name', params: {}, parentSchema: notBlank, data: ' ' });
    const size = err({ keyword: 'minLength', instancePath: '/name', params: {}, parentSchema: notBlank, data: ' ' });

    expect(toFieldErrors([size, e, e])).toEqual([
      { field: 'name', message: 'must not be blank', rejected: ' ' },
      { field: 'name', message: 'size must be between 2 and 100', rejected: ' ' },
    ]);
  });

  it('treats null for a not-blank string as blank, and for another type as null', () => {
    const errors = toFieldErrors([
      err({ keyword: 'type', instancePath: '/name', params: { type: 'string' }, parentSchema: notBlank, data: null }),
      err({
        keyword: 'type',
        instancePath: '/productId',
        params: { type: 'integer' },
        parentSchema: { type: 'integer' },
        data: null,
      }),
      err({
        keyword: 'type',
        instancePath: '/items',
        params: { type: 'array' },
        parentSchema: { type: 'array' },
        data: 'x',
      }),
    ]);

    expect(errors).toEqual([
      { field: 'items', message: 'must be an array', rejected: 'x' },
      { field: 'name', message: 'must not be blank', rejected: null },
      { field: 'productId', message: 'must not be null', rejected: null },
    ]);
  });

  it('returns undefined when the body itself is of the wrong type', () => {
    expect(
      toFieldErrors([
        err({
          keyword: 'type',
          instancePath: '',
          params: { type: 'object' },
          parentSchema: { type: 'object' },
          data: [],
        }),
      ]),
    ).toBeUndefined();
  });
});
