// Values written into a statement as literals, for a pooler in transaction mode.
import { describe, expect, it } from 'vitest';
import { inlineParameters, literal } from './inline-parameters.js';

describe('literal', () => {
  it('quotes every value, doubling quotes; NULL for null', () => {
    expect(literal(null)).toBe('NULL');
    expect(literal(undefined)).toBe('NULL');
    expect(literal(42)).toBe("'42'");
    expect(literal(true)).toBe("'t'");
    expect(literal("O'Brien'); drop table users; --")).toBe("'O''Brien''); drop table users; --'");
    expect(literal('back\\slash')).toBe("'back\\slash'");
    expect(literal(new Date('2026-11-26T07:00:00.000Z'))).toBe("'2026-11-26T07:00:00.000Z'");
    expect(literal(Buffer.from([1, 255]))).toBe("'\\x01ff'");
    expect(literal({ a: "it's" })).toBe(`'{"a":"it''s"}'`);
    expect(literal([1, null, 'a"b', 'c\\d'])).toBe(`'{"1",NULL,"a\\"b","c\\\\d"}'`);
  });

  it('refuses a NUL as PostgreSQL does (22021), since a simple query cannot carry one', () => {
    expect(() => literal('a\0b')).toThrow(expect.objectContaining({ code: '22021' }));
  });
});

describe('inlineParameters', () => {
  it('replaces placeholders, and nothing inside strings, identifiers, dollar quotes or comments', () => {
    const sql = `select $1, '$2', "$3", $$ $1 $$, $tag$ $2 $tag$ -- $1
/* $2 */ x$1, $2::int from t where a = $10`;
    const params = ['one', 2, 3, 4, 5, 6, 7, 8, 9, 'ten'];
    expect(inlineParameters(sql, params)).toBe(`select 'one', '$2', "$3", $$ $1 $$, $tag$ $2 $tag$ -- $1
/* $2 */ x$1, '2'::int from t where a = 'ten'`);
  });

  it('leaves a statement without parameters as it is', () => {
    expect(inlineParameters('select $1', [])).toBe('select $1');
  });
});
