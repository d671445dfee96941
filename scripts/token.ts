// npm run token -- --sub 1 --scope "users:read users:write" [--expires 1h]
// Prints an access token signed with the configured JWT_SECRET (or the development secret in
// DATA_DIR), for development and manual testing (DESIGN §2).
import { parseArgs } from 'node:util';
import { SignJWT } from 'jose';
import { withDevelopmentSecret } from '../src/auth/dev-secret.js';
import { ConfigError, loadConfig } from '../src/config.js';

try {
  const { values } = parseArgs({
    options: {
      sub: { type: 'string' },
      scope: { type: 'string', default: '' },
      expires: { type: 'string', default: '1h' },
    },
  });
  if (values.sub === undefined)
    throw new ConfigError('usage: npm run token -- --sub <user id> [--scope "users:read users:write"] [--expires 1h]');
  const { config } = await withDevelopmentSecret(loadConfig(process.env));
  if (config.jwt.secret === undefined)
    throw new ConfigError(
      'npm run token signs with JWT_SECRET; with a public key or JWKS, get tokens from your identity provider',
    );
  let jwt = new SignJWT({ scope: values.scope })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(values.sub)
    .setIssuedAt()
    .setExpirationTime(values.expires);
  if (config.jwt.issuer) jwt = jwt.setIssuer(config.jwt.issuer);
  if (config.jwt.audience) jwt = jwt.setAudience(config.jwt.audience);
  console.log(await jwt.sign(new TextEncoder().encode(config.jwt.secret)));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
