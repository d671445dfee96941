import { SignJWT } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLOCK_TOLERANCE_SECONDS, TokenVerifier } from './auth.js';

const SECRET = 'unit-test-secret-that-is-long-enough-for-hs256';
const jwt = { secret: SECRET, publicKey: undefined, jwksUrl: undefined, issuer: undefined, audience: undefined };
const sign = (exp: number, sub = '7') =>
  new SignJWT({ scope: 'users:read admin' })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setExpirationTime(exp)
    .sign(new TextEncoder().encode(SECRET));

describe('TokenVerifier', () => {
  afterEach(() => vi.useRealTimers());

  it('maps the claims to a principal', async () => {
    const verifier = await TokenVerifier.create(jwt);

    const exp = Math.floor(Date.now() / 1000) + 60;
    const principal = await verifier.verify(await sign(exp));

    expect(principal).toEqual({
      subject: '7',
      userId: 7,
      scopes: new Set(['users:read', 'admin']),
      admin: true,
      expiresAt: exp * 1000,
    });
  });

  it('stops accepting a cached token once it expires (plus the clock tolerance)', async () => {
    vi.useFakeTimers({ now: new Date('2026-11-22T10:00:00Z') });
    const verifier = await TokenVerifier.create(jwt);
    const token = await sign(Math.floor(Date.now() / 1000) + 10);
    await verifier.verify(token);

    vi.setSystemTime(Date.now() + (10 + CLOCK_TOLERANCE_SECONDS - 1) * 1000);
    await expect(verifier.verify(token)).resolves.toMatchObject({ subject: '7' });
    vi.setSystemTime(Date.now() + 2000);
    await expect(verifier.verify(token)).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
  });

  it('caches nothing when the cache size is 0', async () => {
    const verifier = await TokenVerifier.create(jwt, { tokenCacheSize: 0 });

    await verifier.verify(await sign(Math.floor(Date.now() / 1000) + 60));

    expect(verifier.cachedTokens).toBe(0);
  });

  it('keeps at most the configured number of tokens', async () => {
    const verifier = await TokenVerifier.create(jwt, { tokenCacheSize: 2 });
    const exp = Math.floor(Date.now() / 1000) + 60;
    const tokens = await Promise.all(['1', '2', '3'].map((sub) => sign(exp, sub)));

    for (const t of tokens) await verifier.verify(t);

    expect(verifier.cachedTokens).toBe(2);
    await expect(verifier.verify(tokens[0]!)).resolves.toMatchObject({ subject: '1' });
  });
});
