// docs/operations.md, "Read replicas": a replica never causes a 5xx. A replica whose connections
// are all taken (a long report, a burst of reads) refuses what waited past the queue time-out:
// that refusal sends the work to the primary, as a replica that is down does. The replica here is
// a second pool on the suite's own database (a standby is not needed to be busy), used as the
// service uses a replica's database: plain statements, gathered reads by id, and transactions.
import { sql, type Kysely } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { createDatabase, createReplicaDatabase } from '../../src/db/create-database.js';
import type { Database } from '../../src/db/database.js';
import type { PostgresPool, Reservation } from '../../src/db/postgres-pool.js';
import { findUserById } from '../../src/users/users.repository.js';
import { createUser } from '../support/factories.js';
import { buildTestApp, engine } from '../support/test-app.js';

describe.runIf(engine === 'postgres')('a read replica whose connections are all taken', async () => {
  if (engine !== 'postgres') return;
  const { app, config } = await buildTestApp({ DATABASE_POOL_SIZE: '2', DATABASE_QUEUE_TIMEOUT_MS: '300' });
  if (config.database.kind !== 'postgres') return;
  const database = config.database;
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(app.db);
  // Behind a transaction pooler the file has a database of its own (no search_path there).
  const schema = database.pooler === 'transaction' ? {} : { schema: rows[0]!.schema };
  const primary = await createDatabase(database, schema);
  const replica: { db: Kysely<Database>; pool: PostgresPool } = createReplicaDatabase(
    database,
    database.directUrl,
    primary.pool!,
    schema,
  );
  afterAll(async () => {
    await replica.db.destroy();
    await primary.db.destroy();
  });

  /** Runs `work` while every connection of the replica (one, with a pool of 2) is held. */
  async function whileBusy(work: () => Promise<void>): Promise<void> {
    const held: Reservation = await replica.pool.reserve();
    try {
      await work();
    } finally {
      held.release();
    }
  }

  it('answers a plain statement from the primary', async () => {
    await whileBusy(async () => {
      const { rows: answered } = await sql<{ one: number }>`select 1 as one`.execute(replica.db);
      expect(answered).toEqual([{ one: 1 }]);
    });
  });

  it('answers reads by id from the primary, the one sent alone and the ones gathered behind it', async () => {
    // One at a time: four sign-ups at once (each hashes a password inside its transaction) can
    // wait past the 300-ms queue time-out for the app's two connections on a loaded host.
    const users: Awaited<ReturnType<typeof createUser>>[] = [];
    for (let i = 0; i < 4; i += 1) users.push(await createUser(app));
    await whileBusy(async () => {
      const found = await Promise.all(users.map((user) => findUserById(replica.db, user.id)));
      expect(found.map((row) => row?.id)).toEqual(users.map((user) => user.id));
    });
  });

  it('runs a transaction on the primary', async () => {
    await whileBusy(async () => {
      const answered = await replica.db
        .transaction()
        .execute(async (trx) => (await sql<{ two: number }>`select 2 as two`.execute(trx)).rows);
      expect(answered).toEqual([{ two: 2 }]);
    });
  });
});
