// Signs an access token the way the service will accept it: with the configured JWT_SECRET
// (or the development secret in DATA_DIR), issuer and audience. For the scripts only.
import { SignJWT } from 'jose';
import { withDevelopmentSecret } from '../src/auth/dev-secret.js';
import { ConfigError, loadConfig, type Config } from '../src/config/config.js';

export interface TokenRequest {
  sub: string;
  scope: string;
  /** A jose time span: '1h', '5m'. */
  expires: string;
  /** Who is asking, for the error when only a public key or JWKS is configured. */
  purpose: string;
}

export async function signToken(request: TokenRequest): Promise<{ token: string; config: Config }> {
  const { config } = await withDevelopmentSecret(loadConfig(process.env), { create: false });
  if (config.jwt.secret === undefined)
    throw new ConfigError(
      `${request.purpose} signs with JWT_SECRET; with a public key or JWKS, get tokens from your identity provider`,
    );
  let jwt = new SignJWT({ scope: request.scope })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(request.sub)
    .setIssuedAt()
    .setExpirationTime(request.expires);
  if (config.jwt.issuer) jwt = jwt.setIssuer(config.jwt.issuer);
  if (config.jwt.audience) jwt = jwt.setAudience(config.jwt.audience);
  return { token: await jwt.sign(new TextEncoder().encode(config.jwt.secret)), config };
}
