// Where a request's queries run: `request.db`. Handlers use it, never `app.db`. It is, in order:
// the request's transaction when it was sent with an Idempotency-Key (idempotency/, which holds
// the key's lock in it), the read replica read-replicas.ts chose for a read (`request.readDb`),
// or the database. A sampled request's handle traces its statements beneath its span.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Db } from '../../db/database.js';
import { requestDb } from '../../tracing/http-spans.js';
import { keyedDbOf } from '../idempotency/idempotency.js';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Where the handler's queries run: the request's transaction when it was sent with an
     * Idempotency-Key, otherwise the database (or the replica chosen for a read).
     */
    readonly db: Db;
    /** Set by read-replicas.ts for a read that a replica may answer: where `db` then points. */
    readDb: Db | undefined;
  }
}

async function requestDatabase(app: FastifyInstance): Promise<void> {
  const { db } = app;
  app.decorateRequest('readDb', undefined);
  app.decorateRequest('db', {
    getter(this: FastifyRequest): Db {
      return requestDb(this, keyedDbOf(this) ?? this.readDb ?? db);
    },
  });
}

export default fp(requestDatabase, { name: 'request-db' });
