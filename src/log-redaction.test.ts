import { describe, expect, it } from 'vitest';
import { redactCredentials } from './log-redaction.js';

const line = (fields: Record<string, unknown>) => JSON.stringify(fields);

describe('redactCredentials', () => {
  it('replaces the value of each parameter named like a credential, in any field', () => {
    const before = line({
      url: '/api/public/password-reset?token=secret123&page=2',
      msg: 'link: https://app.example.com/reset#token=secret123',
      err: { message: 'GET https://x.example/hook?api_key=secret123;sig=1 failed', stack: 'at ?AccessToken=secret123' },
    });

    const after = redactCredentials(before);

    expect(after).not.toContain('secret123');
    expect(JSON.parse(after)).toEqual({
      url: '/api/public/password-reset?token=[redacted]&page=2',
      msg: 'link: https://app.example.com/reset#token=[redacted]',
      err: {
        message: 'GET https://x.example/hook?api_key=[redacted];sig=1 failed',
        stack: 'at ?AccessToken=[redacted]',
      },
    });
  });

  it('matches the words in any case, with a prefix or a suffix, and percent-encoded names', () => {
    const names = [
      'token',
      'TOKEN',
      'access_token',
      'apiKey',
      'x-api-key',
      'client_secret',
      'password',
      'passwordConfirm',
      'code',
      'X-Amz-Signature',
      '%74oken',
      'pass%77ord',
    ];

    const redacted = names.map((name) => redactCredentials(line({ url: `/a?${name}=v4lue` })));

    expect(redacted.filter((l) => l.includes('v4lue'))).toEqual([]);
  });

  it('redacts a credential behind a name of any length', () => {
    const name = `${'x'.repeat(300)}_token`;

    expect(redactCredentials(line({ url: `/a?${name}=v4lue&page=2` }))).toBe(
      line({ url: `/a?${name}=[redacted]&page=2` }),
    );
  });

  it('keeps other parameters, bare words and an escaped quote inside a value', () => {
    expect(redactCredentials(line({ url: '/api/v1/users?page=1&size=20&sort=name,asc' }))).toBe(
      line({ url: '/api/v1/users?page=1&size=20&sort=name,asc' }),
    );
    expect(redactCredentials(line({ msg: 'token=abc without a separator' }))).toBe(
      line({ msg: 'token=abc without a separator' }),
    );
    expect(redactCredentials(line({ url: '/a?token=ab"cd&x=1' }))).toBe(line({ url: '/a?token=[redacted]&x=1' }));
    expect(redactCredentials(line({ url: '/a?token=&x=1' }))).toBe(line({ url: '/a?token=&x=1' }));
  });
});
