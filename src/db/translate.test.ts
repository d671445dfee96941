// What a failed statement becomes at the dialect's edge (postgres-js-dialect.ts translate): a
// statement that waited too long for a connection is the overloaded problem (503 with
// Retry-After 1–5), a lost connection is DatabaseUnavailable, anything else stays as it was.
import { describe, expect, it } from 'vitest';
import { DatabaseUnavailable, Overloaded } from '../errors.js';
import { ERRORS } from '../http/problems/error-registry.js';
import { translate } from './postgres-js-dialect.js';

const withCode = (code: string) => Object.assign(new Error(code), { code });

describe('translate', () => {
  it('turns a wait for a connection past DATABASE_QUEUE_TIMEOUT_MS into the overloaded problem', () => {
    const error = translate(withCode('QUEUE_TIMEOUT'));
    expect(error).toBeInstanceOf(Overloaded);
    expect((error as Overloaded).reason).toBe('queue');
    expect(ERRORS.OVERLOADED.type).toBe('overloaded');
    for (let i = 0; i < 50; i++) {
      const retryAfter = Number(ERRORS.OVERLOADED.headers?.(error as Overloaded)['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(5);
    }
  });

  it('turns a lost connection into DatabaseUnavailable, and leaves any other error alone', () => {
    expect(translate(withCode('CONNECTION_CLOSED'))).toBeInstanceOf(DatabaseUnavailable);
    const other = withCode('23505');
    expect(translate(other)).toBe(other);
  });
});
