// Liveness and readiness (docs/operations.md#running-several-instances). Readiness asks the database; a load balancer takes an
// instance out while its database is unreachable.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { pingDatabase } from '../db/database.js';
import { Overloaded } from '../errors.js';
import { NOT_READY_AFTER_MS } from '../http/overload/overload.js';
import { problemResponses } from '../http/schemas.js';

const HealthSchema = Type.Object({ status: Type.Literal('UP') }, { title: 'Health' });
const tags = ['health'];

const health: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/live', {
    config: { probe: true },
    schema: { tags, summary: 'The process is up', security: [], response: { 200: HealthSchema } },
    handler: async (_request, reply) => reply.header('cache-control', 'no-store').send({ status: 'UP' as const }),
  });
  app.get('/ready', {
    config: { probe: true },
    schema: {
      tags,
      summary: 'The service can reach its database and answer in time',
      security: [],
      response: { 200: HealthSchema, ...problemResponses(503) },
    },
    handler: async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      // A request in flight for seconds (statements waiting on a lock, a queue of work): the
      // instance cannot answer in time, and a load balancer should send its traffic elsewhere.
      if (app.admission.oldestMs() > NOT_READY_AFTER_MS) throw new Overloaded('busy');
      await pingDatabase(app.db);
      return { status: 'UP' as const };
    },
  });
};

export default health;
