// POST /api/public/password-resets/completion (docs/api-guide.md#users): the reset link's token and a new
// password, with no bearer token (the link is the proof; the anonymous quota applies).
// Problems in the v1 users form, as the password change's.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { NoContentSchema, problemResponses } from '../http/schemas.js';
import { PasswordResetCompletionSchema } from './users.schemas.js';
import * as users from './users.service.js';

const passwordResetCompletion: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/password-resets/completion', {
    config: { problemForm: 'users-v1' },
    schema: {
      tags: ['users (v1)'],
      summary: 'Complete a password reset',
      description:
        'Sets the new password of the user whose reset link carried `token`, and ends every ' +
        'outstanding reset of that user. An unknown, used or expired token is a 400 naming `token`.',
      security: [],
      body: PasswordResetCompletionSchema,
      response: { 204: NoContentSchema, ...problemResponses(400, 415) },
    },
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      await users.completePasswordReset(request.db, request.body);
      return reply.code(204).send(undefined);
    },
  });
};

export default passwordResetCompletion;
