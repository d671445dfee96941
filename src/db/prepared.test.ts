import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type QueryResult,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from './database.js';
import { prepare } from './prepared.js';

// A Kysely whose driver records what it is asked to run.
function recordingDb() {
  const seen: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    executeQuery: async <R>(q: CompiledQuery): Promise<QueryResult<R>> => {
      seen.push(q);
      return { rows: [{ n: seen.length } as R] };
    },
    streamQuery: () => {
      throw new Error('no');
    },
  };
  const driver = Object.assign(new DummyDriver(), { acquireConnection: async () => connection });
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createQueryCompiler: () => new PostgresQueryCompiler(),
      createIntrospector: (k) => new PostgresIntrospector(k),
    },
  });
  return { db, seen };
}

describe('prepare', () => {
  it('compiles once and binds each call’s arguments, keeping constant values in place', async () => {
    const { db, seen } = recordingDb();
    let builds = 0;
    const query = prepare(2, (k, id: number, customerId: number) => {
      builds++;
      return k
        .selectFrom('orders')
        .select('id')
        .where('status', '=', 'PENDING')
        .where('id', '=', id)
        .where('customer_id', '=', customerId)
        .limit(5);
    });

    await query(db, 7, 42);
    const rows = await query(db, 8, 43);

    expect(builds).toBe(1);
    expect(seen[1]!.sql).toBe(seen[0]!.sql);
    expect(seen[0]!.sql).toBe(
      'select "id" from "orders" where "status" = $1 and "id" = $2 and "customer_id" = $3 limit $4',
    );
    expect(seen[0]!.parameters).toEqual(['PENDING', 7, 42, 5]);
    expect(seen[1]!.parameters).toEqual(['PENDING', 8, 43, 5]);
    expect(rows).toEqual([{ n: 2 }]);
  });
});
