import { describe, expect, it } from 'vitest';
import { isEmail } from './validation.js';

describe('isEmail (Hibernate Validator @Email)', () => {
  it.each([
    'ada@example.com',
    'a.b+c@sub.example.org',
    'user@localhost',
    "o'brien@example.ie",
    'x@[127.0.0.1]',
    'ünï@exämple.de',
    '',
  ])('accepts %j', (v) => {
    expect(isEmail(v)).toBe(true);
  });

  it.each([
    'plain',
    '@example.com',
    'a@',
    'a..b@example.com',
    '.a@example.com',
    'a b@example.com',
    '   ',
    'a@-example.com',
    `${'x'.repeat(65)}@example.com`,
  ])('rejects %j', (v) => {
    expect(isEmail(v)).toBe(false);
  });
});
