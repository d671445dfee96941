// The user routes (docs/api-guide.md#users, docs/api-guide.md#versions), once for both versions. A version supplies what
// differs: its schemas, its problem form, and which members of a body it may set (v1 never
// touches age or address, even when a client sends them: unknown members are ignored).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static, TSchema } from 'typebox';
import { etagFor, ifMatchOf, versioned } from '../http/etag.js';
import { listCursors, paged } from '../http/paging/pagination.js';
import type { ProblemForm } from '../http/problems/to-problem.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { IdParamSchema, NoContentSchema, problemResponses } from '../http/schemas.js';
import { PasswordChangeSchema, UserListQuerySchema } from './users.schemas.js';
import * as users from './users.service.js';
import { passwordResetDelivery } from './password-reset-mail.js';

const read = { scope: 'users:read' };
const write = { scope: 'users:write' };

export interface UserVersion<Create extends TSchema, Replace extends TSchema, Patch extends TSchema> {
  version: 1 | 2;
  problemForm: ProblemForm;
  schemas: { user: TSchema; page: TSchema; create: Create; replace: Replace; patch: Patch };
  /** A create body → the new user's fields. */
  create: (body: Static<Create>) => users.NewUser;
  /** A PUT or PATCH body → the fields this version may change (PUT's schema requires them all). */
  change: (body: Static<Replace> | Static<Patch>) => users.UserFields;
}

/**
 * Registers list, read, create, replace, change, delete and the password sub-resources.
 * (Fastify's type provider cannot resolve a body type from a generic schema, hence the
 * `as Static<…>` on the validated bodies.)
 */
export function userRoutes<Create extends TSchema, Replace extends TSchema, Patch extends TSchema>(
  v: UserVersion<Create, Replace, Patch>,
): FastifyPluginAsyncTypebox {
  const tags = [`users (v${v.version})`];
  const { schemas } = v;
  return async (app) => {
    // docs/api-guide.md#errors: user data is personal; no cache may keep it.
    routeDefaults(app, { problemForm: v.problemForm, cacheControl: 'no-store', version: v.version });

    app.get('/', {
      config: read,
      schema: {
        tags,
        summary: 'List users',
        querystring: UserListQuerySchema,
        response: { 200: schemas.page, ...problemResponses(400, 401, 403) },
      },
      handler: async (request, reply) => {
        const cursors = await listCursors(request, 'users');
        return paged(
          request,
          reply,
          await users.listUsers(request.db, request.principal, request.query, cursors.seek),
          cursors,
        );
      },
    });

    app.get('/:id', {
      config: read,
      schema: {
        tags,
        summary: 'Get a user (ETag from its version; If-None-Match → 304)',
        params: IdParamSchema,
        response: { 200: schemas.user, 304: NoContentSchema, ...problemResponses(400, 401, 403, 404) },
      },
      handler: async (request, reply) =>
        versioned(
          request,
          reply,
          await users.getUser(
            request.db,
            request.principal,
            request.params.id,
            v.version > 1,
            () => request.raw.socket.destroyed,
          ),
        ),
    });

    app.post('/', {
      config: { ...write, admin: 'Creating a user needs the admin scope.' },
      schema: {
        tags,
        summary: 'Create a user',
        body: schemas.create,
        response: { 201: schemas.user, ...problemResponses(400, 401, 403, 409, 415) },
      },
      handler: async (request, reply) => {
        const user = await users.createUser(request.db, request.principal, v.create(request.body as Static<Create>));
        return reply
          .code(201)
          .header('location', createdLocation(request, user.id))
          .header('etag', etagFor(user.version))
          .send(user);
      },
    });

    // PUT replaces (its schema requires every field), PATCH changes what is sent: one use case.
    const change = (method: 'PUT' | 'PATCH', summary: string, body: Replace | Patch) =>
      app.route({
        method,
        url: '/:id',
        config: write,
        schema: {
          tags,
          summary,
          params: IdParamSchema,
          body,
          response: { 200: schemas.user, ...problemResponses(400, 401, 403, 404, 409, 412, 415) },
        },
        handler: async (request, reply) => {
          const body = request.body as Static<Replace | Patch>;
          const user = await users.updateUser(
            request.db,
            request.principal,
            request.params.id,
            v.change(body),
            ifMatchOf(request),
          );
          return versioned(request, reply, user);
        },
      });
    change('PUT', 'Replace a user (If-Match optional; a stale version answers 412)', schemas.replace);
    change('PATCH', 'Change some fields of a user (If-Match optional)', schemas.patch);

    app.delete('/:id', {
      config: write,
      schema: {
        tags,
        summary: 'Delete a user (idempotent; If-Match optional)',
        params: IdParamSchema,
        response: { 204: NoContentSchema, ...problemResponses(400, 401, 403, 412) },
      },
      handler: async (request, reply) => {
        await users.deleteUser(request.db, request.principal, request.params.id, ifMatchOf(request));
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
        await users.changePassword(request.db, request.principal, request.params.id, request.body);
        return reply.code(204).send(undefined);
      },
    });

    app.post('/:id/password-resets', {
      config: write,
      schema: {
        tags,
        summary: 'Request a password reset',
        description:
          'Mails the user a single-use link to choose a new password (completed with ' +
          '`POST /api/public/password-resets/completion`). A new request ends the earlier links.',
        params: IdParamSchema,
        response: { 202: NoContentSchema, ...problemResponses(400, 401, 403, 404) },
      },
      handler: async (request, reply) => {
        // The mail's log lines are the request's (its id, its trace).
        const delivery = passwordResetDelivery(app.config.passwordReset, app.mailer, request.log);
        await users.requestPasswordReset(request.db, request.principal, request.params.id, delivery);
        return reply.code(202).send(undefined);
      },
    });
  };
}
