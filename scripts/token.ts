// npm run -s token                                  the development token (below)
// npm run -s token -- --sub 5 --scope "orders:read orders:write" [--expires 1h]
// Prints an access token signed with the configured JWT_SECRET (or the development secret in
// DATA_DIR) that the service accepts; see `--help`.
import { parseArgs } from 'node:util';
import { ConfigError } from '../src/config/config.js';
import { signToken } from './sign-token.js';

/** Every scope the API knows (docs/api-guide.md, "Authentication, scopes and ownership"). */
export const ALL_SCOPES =
  'admin users:read users:write orders:read orders:write products:read products:write webhooks:read webhooks:write';

const USAGE = `Prints an access token the service accepts, signed with JWT_SECRET (or, in development,
the secret generated into DATA_DIR/jwt-secret).

usage: npm run -s token [-- options]

  (no options)        the development token: user 1, every scope (admin included), valid
                      24 hours; every example in the docs accepts it
  --sub <user id>     the caller's user id (the token's sub): a positive integer
  --scope "<scopes>"  space-separated, e.g. "orders:read orders:write" (default: none)
                      known (any other is refused): ${ALL_SCOPES}
  --expires <span>    how long it is valid: 30m, 1h, 7d (default: 1h; 24h without --sub)
  --help              this text

Use -s so that npm prints only the token: TOKEN=$(npm run -s token)`;

try {
  const { values } = parseArgs({
    options: {
      sub: { type: 'string' },
      scope: { type: 'string' },
      expires: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(USAGE);
    process.exit(0);
  }
  const development = values.sub === undefined;
  if (development && values.scope !== undefined)
    throw new ConfigError('--scope needs --sub (without both, the development token has every scope)');
  if (values.sub !== undefined && !/^[1-9]\d{0,15}$/.test(values.sub))
    throw new ConfigError(
      `--sub must be a user id (a positive integer): the token's sub is the caller's user id (got ${JSON.stringify(values.sub)})`,
    );
  const known = new Set(ALL_SCOPES.split(' '));
  const unknown = (values.scope ?? '').split(/\s+/).filter((scope) => scope !== '' && !known.has(scope));
  if (unknown.length > 0)
    throw new ConfigError(
      `--scope names ${unknown.length === 1 ? 'a scope' : 'scopes'} the service does not know: ${unknown.map((s) => JSON.stringify(s)).join(', ')} (known: ${ALL_SCOPES})`,
    );
  const { token } = await signToken({
    sub: values.sub ?? '1',
    scope: values.scope ?? (development ? ALL_SCOPES : ''),
    expires: values.expires ?? (development ? '24h' : '1h'),
    purpose: 'npm run token',
  });
  console.log(token);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  if (error instanceof TypeError) console.error(`\n${USAGE}`); // an unknown option
  process.exit(1);
}
