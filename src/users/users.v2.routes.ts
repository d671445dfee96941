// /api/v2/users (DESIGN §6): v1's routes with age and address, and typed problems. Same
// service and repository as v1.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { paged } from '../http/pagination.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { IdParamSchema, problemResponses } from '../http/schemas.js';
import {
  CreateUserV2Schema,
  PatchUserV2Schema,
  UpdateUserV2Schema,
  UserListQuerySchema,
  UserPageV2Schema,
  UserV2Schema,
} from './users.schemas.js';
import { read, userSubResources, write } from './users.routes.js';
import * as users from './users.service.js';

const tags = ['users (v2)'];

const usersV2: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app;
  const { trustProxy } = app.config;

  // DESIGN §7: user data is personal; no cache may keep it.
  routeDefaults(app, { problemForm: 'typed', cacheControl: 'no-store', version: 2 });

  app.get('/', {
    config: read,
    schema: {
      tags,
      summary: 'List users',
      querystring: UserListQuerySchema,
      response: { 200: UserPageV2Schema, ...problemResponses(400, 401, 403) },
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
      response: { 200: UserV2Schema, ...problemResponses(400, 401, 403, 404) },
    },
    handler: async (request) => users.getUser(db, request.principal, request.params.id),
  });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Create a user',
      body: CreateUserV2Schema,
      response: { 201: UserV2Schema, ...problemResponses(400, 401, 403, 409, 415) },
    },
    handler: async (request, reply) => {
      const user = await users.createUser(db, request.principal, request.body);
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
      body: UpdateUserV2Schema,
      response: { 200: UserV2Schema, ...problemResponses(400, 401, 403, 404, 409, 415) },
    },
    handler: async (request) => users.updateUser(db, request.principal, request.params.id, request.body),
  });

  app.patch('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Change some fields of a user',
      params: IdParamSchema,
      body: PatchUserV2Schema,
      response: { 200: UserV2Schema, ...problemResponses(400, 401, 403, 404, 409, 415) },
    },
    handler: async (request) => {
      const { name, email, age, address } = request.body;
      return users.updateUser(db, request.principal, request.params.id, { name, email, age, address });
    },
  });

  await app.register(userSubResources(tags));
};

export default usersV2;
