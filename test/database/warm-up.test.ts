// The warm-up the server runs before its port opens (src/db/prepared.ts, warmUp): every hot
// statement, placing an order among them, on every connection of the pool, without writing a
// row. Without it, a new instance's first wave of orders paid each backend's first run of the
// order statement at once (docs/benchmark-log.md). PostgreSQL lists the statements a connection has
// prepared in pg_prepared_statements, which each connection answers for itself.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { onEveryConnection, warmUp } from '../../src/db/prepared.js';
import { aCustomer, createProduct, placeOrder } from '../support/factories.js';
import { buildTestApp, engine, testPostgres } from '../support/test-app.js';

const POOL_SIZE = 3;
const { app } = await buildTestApp({ DATABASE_POOL_SIZE: String(POOL_SIZE) });
const { db } = app;

/** Each connection's prepared statements, by text. */
async function preparedPerConnection(): Promise<string[][]> {
  const perConnection = await onEveryConnection(db, 'select statement from pg_prepared_statements');
  return perConnection.map((rows) => (rows as { statement: string }[]).map((row) => row.statement));
}

/** Everything placing an order writes or moves, in one row. */
async function fingerprint(): Promise<Record<string, string>> {
  const { rows } = await sql<Record<string, string>>`
    select (select count(*) from orders)::text as orders,
           (select count(*) from order_items)::text as items,
           (select count(*) from events)::text as events,
           (select count(*) from webhook_deliveries)::text as deliveries,
           (select count(*) || ':' || coalesce(sum(n), 0) from row_counts)::text as row_counts,
           (select sum(available) || ':' || sum(reserved) from stock)::text as stock`.execute(db);
  return rows[0]!;
}

const placesAnOrder = (text: string) => /insert into orders\b/.test(text);

// Behind a transaction pooler there are no named prepared statements to find (nor to warm).
describe.skipIf(testPostgres.pooler === 'transaction')('the warm-up before the port opens', () => {
  it('runs every hot statement on every connection, placing an order included, and writes nothing', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);

    // Control: no connection has ever placed an order, so none has the statement yet.
    const before = await preparedPerConnection();
    expect(before).toHaveLength(engine === 'postgres' ? POOL_SIZE : 1);
    for (const statements of before) expect(statements.filter(placesAnOrder)).toEqual([]);
    const untouched = await fingerprint();

    const warmed = await warmUp(db);

    expect(warmed.filter(placesAnOrder)).toHaveLength(1);
    // Placing an order; the primary-key reads of users (the whole row and v1's columns), products,
    // stock and orders (any, and the caller's own); the users count.
    expect(warmed.length).toBeGreaterThanOrEqual(8);
    for (const statements of await preparedPerConnection()) expect(statements).toEqual(expect.arrayContaining(warmed));
    expect(await fingerprint()).toEqual(untouched);

    // The fingerprint sees an order: the warm-up's statement, run for real, places one.
    const placed = await placeOrder(app, customer.auth, product.id, 2);
    expect(placed.statusCode, placed.body).toBe(201);
    const after = await fingerprint();
    expect(after.orders).toBe(String(Number(untouched.orders) + 1));
    expect(after.events).toBe(String(Number(untouched.events) + 1));
    expect(after.stock).not.toBe(untouched.stock);
  });

  it('can run again on connections that have the statements', async () => {
    const untouched = await fingerprint();
    await expect(warmUp(db)).resolves.not.toHaveLength(0);
    expect(await fingerprint()).toEqual(untouched);
  });
});
