// Liveness and readiness (docs/operations.md#running-several-instances). Readiness asks the database; a load balancer takes an
// instance out while its database is unreachable.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Counter, Gauge } from 'prom-client';
import { Type } from 'typebox';
import { pingDatabase } from '../db/database.js';
import { Overloaded } from '../errors.js';
import { NOT_READY_AFTER_MS } from '../http/overload/overload.js';
import { problemResponses } from '../http/schemas.js';

const HealthSchema = Type.Object({ status: Type.Literal('UP') }, { title: 'Health' });
const tags = ['health'];

const health: FastifyPluginAsyncTypebox = async (app) => {
  // What readiness last answered, and how often its answer changed (docs/runbook.md: an instance
  // whose readiness flaps goes in and out of its load balancer's rotation). The port opens only
  // once the instance is ready (its pool connected and warmed), so it starts ready.
  let ready = true;
  const state = new Gauge({
    name: 'health_ready',
    help: 'What the readiness probe last answered: 1 ready (200), 0 not ready (503)',
    registers: [app.metrics],
  });
  state.set(1);
  const changes = new Counter({
    name: 'health_ready_changes_total',
    help: 'Times the readiness probe answered otherwise than the time before (ready to not ready, or back)',
    registers: [app.metrics],
  });
  const answered = (now: boolean): void => {
    if (now === ready) return;
    ready = now;
    state.set(now ? 1 : 0);
    changes.inc();
  };

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
      try {
        if (app.admission.oldestMs() > NOT_READY_AFTER_MS) throw new Overloaded('busy');
        await pingDatabase(app.db);
      } catch (error) {
        answered(false);
        throw error;
      }
      answered(true);
      return { status: 'UP' as const };
    },
  });
};

export default health;
