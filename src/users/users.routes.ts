// The user routes v1 and v2 share (spec 4.1 rule 3 and 6, DESIGN §3): deletion and the
// password sub-resources, whose shapes do not differ by version.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { IdParamSchema, NoContentSchema, problemResponses } from '../http/schemas.js';
import { PasswordChangeSchema } from './users.schemas.js';
import * as users from './users.service.js';

export const read = { scope: 'users:read' };
export const write = { scope: 'users:write' };

export function userSubResources(tags: string[]): FastifyPluginAsyncTypebox {
  return async (app) => {
    const { db } = app;

    app.delete('/:id', {
      config: write,
      schema: {
        tags,
        summary: 'Delete a user (idempotent)',
        params: IdParamSchema,
        response: { 204: NoContentSchema, ...problemResponses(400, 401, 403) },
      },
      handler: async (request, reply) => {
        await users.deleteUser(db, request.principal, request.params.id);
        return reply.code(204).send(undefined);
      },
    });

    app.post('/:id/password-changes', {
      config: write,
      schema: {
        tags,
        summary: 'Change the password',
        params: IdParamSchema,
        body: PasswordChangeSchema,
        response: { 204: NoContentSchema, ...problemResponses(400, 401, 403, 404, 415, 422) },
      },
      handler: async (request, reply) => {
        await users.changePassword(db, request.principal, request.params.id, request.body);
        return reply.code(204).send(undefined);
      },
    });

    app.post('/:id/password-resets', {
      config: write,
      schema: {
        tags,
        summary: 'Request a password reset (the token is delivered out of band)',
        params: IdParamSchema,
        response: { 202: NoContentSchema, ...problemResponses(400, 401, 403, 404) },
      },
      handler: async (request, reply) => {
        await users.requestPasswordReset(db, request.principal, request.params.id);
        return reply.code(202).send(undefined);
      },
    });
  };
}
