import { describe, expect, it } from 'vitest';
import { fromCents, fromJsonNumber, lineTotal, toCents, toJsonNumber } from './money.js';

describe('money', () => {
  it('multiplies without floating-point error', () => {
    expect(0.1 + 0.2).not.toBe(0.3);
    expect(1.1 * 3).toBe(3.3000000000000003);
    expect(lineTotal('1.10', 3)).toBe('3.30');
    expect(lineTotal('19.99', 3)).toBe('59.97');
    expect(JSON.stringify({ total: toJsonNumber(lineTotal('19.99', 3)) })).toBe('{"total":59.97}');
  });

  it('converts between strings, cents and JSON numbers', () => {
    expect(toCents('5')).toBe(500n);
    expect(toCents('5.5')).toBe(550n);
    expect(toCents('0.07')).toBe(7n);
    expect(fromCents(7n)).toBe('0.07');
    expect(fromCents(-150n)).toBe('-1.50');
    expect(fromJsonNumber(19.99)).toBe('19.99');
    expect(fromJsonNumber(0.07)).toBe('0.07');
    expect(fromJsonNumber(10)).toBe('10.00');
    expect(() => toCents('1.999')).toThrow(RangeError);
    expect(() => toCents('abc')).toThrow(RangeError);
  });
});
