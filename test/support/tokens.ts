// Access tokens for tests, signed like a real issuer would with the test secret.
import { SignJWT } from 'jose';
import { TEST_JWT_SECRET } from './test-app.js';

export interface TokenClaims {
  sub?: string;
  scope?: string;
  /** seconds from now; negative for an expired token */
  expiresIn?: number;
  secret?: string;
  claims?: Record<string, unknown>;
  issuer?: string;
  audience?: string;
}

export async function token({
  sub = '1',
  scope = '',
  expiresIn = 3600,
  secret = TEST_JWT_SECRET,
  claims = {},
  issuer,
  audience,
}: TokenClaims = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  let jwt = new SignJWT({ scope, ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(sub)
    .setIssuedAt(now)
    .setExpirationTime(now + expiresIn);
  if (issuer) jwt = jwt.setIssuer(issuer);
  if (audience) jwt = jwt.setAudience(audience);
  return jwt.sign(new TextEncoder().encode(secret));
}

export async function bearer(claims: TokenClaims = {}): Promise<string> {
  return `Bearer ${await token(claims)}`;
}

export const ALL_SCOPES =
  'users:read users:write orders:read orders:write products:read products:write webhooks:read webhooks:write';

/** An administrator with every scope: the caller for tests that are not about permissions. */
export const ADMIN = await bearer({ sub: '999999999', scope: `admin ${ALL_SCOPES}` });
