// GET /api/public/password-reset#token=…: the page a mailed reset link opens by default
// (PASSWORD_RESET_URL): a form for the new password whose script (password-reset.js, a file of its
// own: no inline script, so a strict Content-Security-Policy holds) reads the token from the
// address's fragment, calls POST /api/public/password-resets/completion and says what came of it.
// The fragment never leaves the browser: no request line, proxy or log sees the token, and no
// Referer carries it. Teams with their own app point PASSWORD_RESET_URL at its page instead.
// No third-party asset.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { problemResponses } from '../http/schemas.js';

/** The page's files: beside this module in src/, and found there from dist/src/ when built. */
function readAsset(name: string): string {
  const dirs = [
    join(import.meta.dirname, 'reset-page'),
    join(import.meta.dirname, '..', '..', '..', 'src', 'users', 'reset-page'),
  ];
  for (const dir of dirs) {
    try {
      return readFileSync(join(dir, name), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  throw new Error(`src/users/reset-page/${name} is missing`);
}

/** What the page may load and where it may send: itself only. */
export const RESET_PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

const ASSETS = [
  { path: '/password-reset', file: 'password-reset.html', type: 'text/html', summary: 'The password reset page' },
  {
    path: '/password-reset.js',
    file: 'password-reset.js',
    type: 'text/javascript',
    summary: "The password reset page's script",
  },
  {
    path: '/password-reset.css',
    file: 'password-reset.css',
    type: 'text/css',
    summary: "The password reset page's style",
  },
] as const;

const passwordResetPage: FastifyPluginAsyncTypebox = async (app) => {
  for (const asset of ASSETS) {
    const body = readAsset(asset.file);
    app.get(asset.path, {
      schema: {
        tags: ['users (v1)'],
        summary: asset.summary,
        description:
          asset.type === 'text/html'
            ? 'The page a reset link opens (the default `PASSWORD_RESET_URL`, with `#token=…`): it asks for the ' +
              'new password and sends it with the token of its address to ' +
              '`POST /api/public/password-resets/completion`. The token is in the fragment, which the ' +
              "browser never sends: only the page's script reads it."
            : 'A file the password reset page loads.',
        security: [],
        response: {
          200: {
            description: asset.summary,
            content: { [asset.type]: { schema: Type.String({ maxLength: 65_536 }) } },
          },
          ...problemResponses(400),
        },
      },
      config: { produces: [asset.type] },
      handler: async (_request, reply) => {
        reply
          .type(`${asset.type}; charset=utf-8`)
          .header('cache-control', asset.type === 'text/html' ? 'no-store' : 'public, max-age=3600')
          .header('referrer-policy', 'no-referrer')
          .header('x-content-type-options', 'nosniff');
        if (asset.type === 'text/html')
          reply.header('content-security-policy', RESET_PAGE_CSP).header('x-frame-options', 'DENY');
        return reply.send(body);
      },
    });
  }
};

export default passwordResetPage;
