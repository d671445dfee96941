// test/support/required.ts: a suite that needs what the machine lacks fails in CI, and is skipped
// elsewhere, saying so.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { required } from './required.js';

describe('required', () => {
  const ci = process.env.CI;
  afterEach(() => {
    process.env.CI = ci;
    vi.restoreAllMocks();
  });

  it('lets a suite run when nothing is missing', () => {
    expect(required('a.test.ts', undefined)).toBe(true);
  });

  it('fails the file in CI when something is missing', () => {
    process.env.CI = 'true';
    expect(() => required('a.test.ts', 'nothing listens on 127.0.0.1:6379')).toThrow(
      'a.test.ts cannot run in CI: nothing listens on 127.0.0.1:6379',
    );
  });

  it('skips it elsewhere, saying what is missing', () => {
    process.env.CI = '';
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(required('a.test.ts', 'no redis-server on PATH')).toBe(false);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('SKIPPED a.test.ts: no redis-server on PATH'));
  });
});
