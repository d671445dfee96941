// npm run token -- --sub 1 --scope "users:read users:write" [--expires 1h]
// Prints an access token signed with the configured JWT_SECRET (or the development secret in
// DATA_DIR), for development and manual testing (DESIGN §2).
import { parseArgs } from 'node:util';
import { ConfigError } from '../src/config.js';
import { signToken } from './sign-token.js';

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
  const { token } = await signToken({ ...values, sub: values.sub, purpose: 'npm run token' });
  console.log(token);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
