// docs/api-guide.md#errors: while PostgreSQL is down the service answers 503 with Retry-After and is not
// ready; when it returns, the same process serves again without a restart.
import { afterAll, describe, expect, it } from 'vitest';
import { aUserRequest, asAdmin } from '../support/factories.js';
import { createPrivatePostgres, privatePostgresUnavailable } from '../support/private-postgres.js';
import { required } from '../support/required.js';
import { buildTestApp, engine } from '../support/test-app.js';

const run = engine === 'postgres' && required('test/processes/postgres-restart.test.ts', privatePostgresUnavailable);

describe.runIf(run)('a PostgreSQL restart under a running service', async () => {
  // A skipped suite's body still runs at collection: without this, every run of the embedded
  // project started a private cluster that no afterAll stopped.
  if (!run) return;
  const pg = await createPrivatePostgres();
  afterAll(() => {
    pg.destroy();
  });
  const { app } = await buildTestApp({ DATABASE_URL: pg.url });
  const api = asAdmin(app);

  it('answers 503 while the database is down and recovers by itself when it returns', async () => {
    const created = await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() });
    expect(created.statusCode).toBe(201);
    const { id } = created.json();

    pg.stop();
    const down = await api({ method: 'GET', url: `/api/v1/users/${id}` });
    const notReady = await api({ method: 'GET', url: '/api/public/health/ready' });
    const live = await api({ method: 'GET', url: '/api/public/health/live' });

    expect(down.statusCode).toBe(503);
    expect(down.headers['retry-after']).toBe('5');
    expect(down.json()).toEqual({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The service cannot reach its database. Retry later.',
      instance: `/api/v1/users/${id}`,
    });
    expect(notReady.statusCode).toBe(503);
    expect(live.statusCode).toBe(200);

    pg.start();
    const back = await api({ method: 'GET', url: `/api/v1/users/${id}` });
    const ready = await api({ method: 'GET', url: '/api/public/health/ready' });
    const write = await api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() });

    expect(back.statusCode, back.body).toBe(200);
    expect(back.json().id).toBe(id);
    expect(ready.statusCode).toBe(200);
    expect(write.statusCode).toBe(201);
  });
});
