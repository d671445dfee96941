// /api/v1/webhook-subscriptions (docs/webhooks.md): scopes webhooks:read / webhooks:write, and admin.
// Typed problems. Secrets are in two answers only (create, rotation); nothing here is cached.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { paged } from '../http/paging/pagination.js';
import { createdLocation } from '../http/request-url.js';
import { routeDefaults } from '../http/route-defaults.js';
import { EmptyBodySchema, IdParamSchema, NoContentSchema, problemResponses } from '../http/schemas.js';
import {
  CreateWebhookSubscriptionSchema,
  PatchWebhookSubscriptionSchema,
  WebhookSubscriptionListQuerySchema,
  WebhookSubscriptionPageSchema,
  WebhookSubscriptionSchema,
  WebhookSubscriptionWithSecretSchema,
  DeliveryParamsSchema,
  WebhookDeliveryListQuerySchema,
  WebhookDeliveryPageSchema,
} from './webhooks.schemas.js';
import * as webhooks from './webhooks.service.js';

const tags = ['webhooks'];
// Administrators only, refused before anything runs (a replayed creation included).
const read = { scope: 'webhooks:read', admin: webhooks.ADMIN_ONLY };
const write = { scope: 'webhooks:write', admin: webhooks.ADMIN_ONLY };

const webhookRoutes: FastifyPluginAsyncTypebox = async (app) => {
  routeDefaults(app, { problemForm: 'typed', cacheControl: 'no-store', version: 1 });
  const policy = (): webhooks.Policy => ({
    allowPrivateNetworks: app.config.webhooks.allowPrivateNetworks,
    secretOverlapHours: app.config.webhooks.secretOverlapHours,
    resolveHost: app.resolveHost,
    encryption: app.encryption,
  });

  app.get('/', {
    config: read,
    schema: {
      tags,
      summary: 'List webhook subscriptions (newest first; admin)',
      querystring: WebhookSubscriptionListQuerySchema,
      response: { 200: WebhookSubscriptionPageSchema, ...problemResponses(400, 401, 403) },
    },
    handler: async (request, reply) =>
      paged(request, reply, await webhooks.listSubscriptions(request.db, request.principal, request.query)),
  });

  app.get('/:id', {
    config: read,
    schema: {
      tags,
      summary: 'Get a webhook subscription (without its secret; admin)',
      params: IdParamSchema,
      response: { 200: WebhookSubscriptionSchema, ...problemResponses(400, 401, 403, 404) },
    },
    handler: async (request) => webhooks.getSubscription(request.db, request.principal, request.params.id),
  });

  app.post('/', {
    config: write,
    schema: {
      tags,
      summary: 'Subscribe a URL to events (admin); the answer shows the signing secret, once',
      body: CreateWebhookSubscriptionSchema,
      response: { 201: WebhookSubscriptionWithSecretSchema, ...problemResponses(400, 401, 403, 415) },
    },
    handler: async (request, reply) => {
      const created = await webhooks.createSubscription(request.db, request.principal, request.body, policy());
      return reply.code(201).header('location', createdLocation(request, created.id)).send(created);
    },
  });

  app.patch('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Change a subscription’s URL, events, description, or pause it (admin)',
      params: IdParamSchema,
      body: PatchWebhookSubscriptionSchema,
      response: { 200: WebhookSubscriptionSchema, ...problemResponses(400, 401, 403, 404, 415) },
    },
    handler: async (request) =>
      webhooks.updateSubscription(request.db, request.principal, request.params.id, request.body, policy()),
  });

  app.delete('/:id', {
    config: write,
    schema: {
      tags,
      summary: 'Delete a subscription (idempotent; admin)',
      params: IdParamSchema,
      response: { 204: NoContentSchema, ...problemResponses(400, 401, 403) },
    },
    handler: async (request, reply) => {
      await webhooks.deleteSubscription(request.db, request.principal, request.params.id);
      return reply.code(204).send();
    },
  });

  app.post('/:id/secret-rotation', {
    config: write,
    schema: {
      tags,
      summary: 'Rotate the signing secret (admin): the old one keeps signing for WEBHOOK_SECRET_OVERLAP_HOURS',
      params: IdParamSchema,
      body: EmptyBodySchema,
      response: { 200: WebhookSubscriptionWithSecretSchema, ...problemResponses(400, 401, 403, 404, 415) },
    },
    handler: async (request) => webhooks.rotateSecret(request.db, request.principal, request.params.id, policy()),
  });

  app.get('/:id/deliveries', {
    config: read,
    schema: {
      tags,
      summary: 'The delivery log of a subscription, newest first (admin)',
      params: IdParamSchema,
      querystring: WebhookDeliveryListQuerySchema,
      response: { 200: WebhookDeliveryPageSchema, ...problemResponses(400, 401, 403, 404) },
    },
    handler: async (request, reply) =>
      paged(
        request,
        reply,
        await webhooks.listDeliveries(request.db, request.principal, request.params.id, request.query),
      ),
  });

  app.post('/:id/deliveries/:deliveryId/redelivery', {
    config: write,
    schema: {
      tags,
      summary: 'Send a delivery again, with the same webhook-id (admin)',
      params: DeliveryParamsSchema,
      body: EmptyBodySchema,
      response: { 202: NoContentSchema, ...problemResponses(400, 401, 403, 404, 415) },
    },
    handler: async (request, reply) => {
      await webhooks.redeliver(request.db, request.principal, request.params.id, request.params.deliveryId);
      app.wakeDispatcher();
      return reply.code(202).send();
    },
  });
};

export default webhookRoutes;
