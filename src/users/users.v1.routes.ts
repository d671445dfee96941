// /api/v1/users (spec 4.1, DESIGN §3). Handlers only: schema → service → reply.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { paged } from '../http/pagination.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { IdParamSchema, problemResponses } from '../http/schemas.js';
import {
  CreateUserV1Schema,
  PatchUserV1Schema,
  UpdateUserV1Schema,
  UserListQuerySchema,
  UserPageV1Schema,
  UserV1Schema,
} from './users.schemas.js';
import { read, userSubResources, write } from './users.routes.js';
import * as users from './users.service.js';

const tags = ['users (v1)'];

const usersV1: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;
  const { trustProxy } = app.config;

  // DESIGN §7: user data is personal; no cache may keep it.
  routeDefaults(app, { problemForm: 'users-v1', cacheControl: 'no-store', version: 1 });

  app.get('/', {
    config: read,
    schema: {
      tags,
      summary: 'List users',
      querystring: UserListQuerySchema,
      response: { 200: UserPageV1Schema, ...problemResponses(400, 401, 403) },
    },
    handler: async (request, reply) =>
      paged(request, reply, trustProxy, await users.listUsers(db, request.principal, request.query)),
  });

  app.get('/:id', {
    config: read,
    schema: {
      tags,
      summary: 'Get a user',
      params: IdParamSchema,
      response: { 200: UserV1Schema, ...problemResponses(400, 401, 403, 404) },
    },
    handler: async (request) => users.getUser(db, request.principal, request.params.id),
  });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Create a user',
      body: CreateUserV1Schema,
      response: { 201: UserV1Schema, ...problemResponses(400, 401, 403, 409, 415) },
    },
    handler: async (request, reply) => {
      const user = await users.createUser(db, request.principal, {
        name: request.body.name,
        email: request.body.email,
        password: request.body.password,
      });
      return reply
        .code(201)
        .header('location', createdLocation(request, trustProxy, user.id))
        .send(user);
    },
  });

  app.put('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Replace a user',
      params: IdParamSchema,
      body: UpdateUserV1Schema,
      response: { 200: UserV1Schema, ...problemResponses(400, 401, 403, 404, 409, 415) },
    },
    handler: async (request) =>
      users.updateUser(db, request.principal, request.params.id, {
        name: request.body.name,
        email: request.body.email,
      }),
  });

  app.patch('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Change some fields of a user',
      params: IdParamSchema,
      body: PatchUserV1Schema,
      response: { 200: UserV1Schema, ...problemResponses(400, 401, 403, 404, 409, 415) },
    },
    handler: async (request) =>
      users.updateUser(db, request.principal, request.params.id, {
        name: request.body.name,
        email: request.body.email,
      }),
  });

  await app.register(userSubResources(tags));
};

export default usersV1;
