// docs/api-guide.md#errors: a request refused because a statement of it waited longer than
// DATABASE_QUEUE_TIMEOUT_MS for a connection is answered 503 overloaded, with a detail that says
// what is true of it, so that a client knows how to retry: a read changed nothing; a request sent
// with an Idempotency-Key kept nothing (its transaction rolled back) and is retried with the same
// key; a write sent without one may have run statements before the one refused (the service does
// not follow which statements belong to which request).
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { poolOf } from '../../src/db/create-database.js';
import { aUserRequest, createUser } from '../support/factories.js';
import { buildTestApp, engine } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';

describe.runIf(engine === 'postgres')('a statement that waited too long for a connection', async () => {
  if (engine !== 'postgres') return;
  const { app } = await buildTestApp({ DATABASE_POOL_SIZE: '1', DATABASE_QUEUE_TIMEOUT_MS: '300' });
  const pool = poolOf(app.db)!;

  /** `request`'s answer while the pool's one connection is held by a transaction of the test's. */
  async function whileHeld(request: () => Promise<LightMyRequestResponse>) {
    const held = await pool.reserve();
    try {
      return await request();
    } finally {
      held.release();
    }
  }

  const overloaded = (detail: string) => ({
    type: `${app.config.errorTypeBase}/overloaded`,
    title: 'Service Unavailable',
    status: 503,
    detail,
    instance: expect.any(String),
  });

  it('says that a read changed nothing', async () => {
    const user = await createUser(app);

    const answer = await whileHeld(() =>
      app.inject({ method: 'GET', url: `/api/v1/users/${user.id}`, headers: { authorization: ADMIN } }),
    );

    expect(answer.statusCode, answer.body).toBe(503);
    expect(answer.headers['retry-after']).toMatch(/^[1-5]$/);
    expect(answer.json()).toEqual(
      overloaded(
        'The database was too busy to answer in time: a statement of this request waited too long for the database and was not sent. A read changes nothing: retry later.',
      ),
    );
  });

  it('says that a request sent with an Idempotency-Key did not start, and a retry with the key succeeds', async () => {
    const request = {
      method: 'POST' as const,
      url: '/api/v1/users',
      payload: aUserRequest(),
      headers: { authorization: ADMIN, 'idempotency-key': `queue-${Date.now()}` },
    };

    const refused = await whileHeld(() => app.inject(request));
    const retried = await app.inject(request);

    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json()).toEqual(
      overloaded(
        'The database was too busy to answer in time: this request did not start, and nothing of it was kept. Retry later with the same Idempotency-Key.',
      ),
    );
    expect(retried.statusCode, retried.body).toBe(201);
  });

  it('says that a write sent without an Idempotency-Key may have run in part', async () => {
    const refused = await whileHeld(() =>
      app.inject({ method: 'POST', url: '/api/v1/users', payload: aUserRequest(), headers: { authorization: ADMIN } }),
    );

    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json()).toEqual(
      overloaded(
        'The database was too busy to answer in time: a statement of this request waited too long for the database and was not sent, and statements of it sent before may have run. Check what was done before retrying; a request sent with an Idempotency-Key can be retried safely.',
      ),
    );
  });
});
