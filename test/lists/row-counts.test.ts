// Exact totals without counting (migration 0008): the users, orders and per-status totals of
// the lists come from counters that triggers keep in the same transaction as every insert,
// delete and status change. Many concurrent writers, then every counter against count(*).
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const STATUSES = ['PENDING', 'CONFIRMED', 'SHIPPED', 'DELIVERED', 'CANCELLED'] as const;

async function listTotal(url: string): Promise<number> {
  const response = await api({ method: 'GET', url });
  expect(response.statusCode, response.body).toBe(200);
  const total = response.json<{ totalElements: number }>().totalElements;
  expect(response.headers['x-total-count']).toBe(String(total));
  return total;
}

async function counted(query: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.raw(query)}`.execute(app.db);
  return rows[0]!.n;
}

/** Every total the lists serve equals count(*) of the rows. */
async function expectExactTotals(): Promise<void> {
  expect(await listTotal('/api/v1/users?size=1')).toBe(await counted('users'));
  expect(await listTotal('/api/v2/users?size=1')).toBe(await counted('users'));
  expect(await listTotal('/api/v1/orders?size=1')).toBe(await counted('orders'));
  for (const status of STATUSES) {
    expect(await listTotal(`/api/v1/orders?size=1&status=${status}`), status).toBe(
      await counted(`orders where status = '${status}'`),
    );
  }
}

describe('list totals', () => {
  it('stay exact through many concurrent creates, deletes and status changes', async () => {
    const product = await createProduct(app, { price: 3 }, 100_000);
    const customers = await Promise.all(Array.from({ length: 4 }, () => aCustomer(app)));
    const orderIds: number[] = [];
    for (let i = 0; i < 24; i++) {
      const placed = await placeOrder(app, customers[i % 4]!.auth, product.id, 1);
      expect(placed.statusCode, placed.body).toBe(201);
      orderIds.push(placed.json<{ id: number }>().id);
    }
    const doomedUsers = await Promise.all(Array.from({ length: 10 }, () => createUser(app)));
    await expectExactTotals();

    const action = (id: number, noun: string, payload?: object) =>
      api({ method: 'POST', url: `/api/v1/orders/${id}/${noun}`, ...(payload ? { payload } : {}) });
    // All at once: new users and orders, users and orders deleted, orders confirmed, shipped,
    // cancelled; some of them race for the same order (one wins, the other is a 409).
    const work: Promise<unknown>[] = [
      ...Array.from({ length: 20 }, () => createUser(app)),
      ...Array.from({ length: 20 }, (_, i) => placeOrder(app, customers[i % 4]!.auth, product.id, 1)),
      ...doomedUsers.map((u) => api({ method: 'DELETE', url: `/api/v1/users/${u.id}` })),
      ...orderIds.slice(0, 6).map((id) => action(id, 'cancellation', { reason: 'changed my mind' })),
      ...orderIds.slice(3, 9).map((id) => action(id, 'confirmation')),
      ...orderIds.slice(9, 14).map((id) => api({ method: 'DELETE', url: `/api/v1/orders/${id}` })),
      ...orderIds.slice(14, 20).map(async (id) => {
        await action(id, 'confirmation');
        await action(id, 'shipment');
        await action(id, 'delivery');
      }),
    ];
    const answers = await Promise.all(work);
    // Racing writers wait for one another (or get a 409); none fails for the counters' sake.
    for (const answer of answers) {
      const status = (answer as { statusCode?: number } | undefined)?.statusCode;
      if (status !== undefined) expect([200, 201, 204, 409]).toContain(status);
    }
    await expectExactTotals();

    // Writers spread over the shards: no single row serialises them.
    const { rows } = await sql<{ shards: number }>`
      select count(distinct shard)::int as shards from row_counts where name = 'users'`.execute(app.db);
    expect(rows[0]!.shards).toBeGreaterThan(1);
  });

  it('count nothing for a request that fails, or for a DELETE of something already gone', async () => {
    const user = await createUser(app);
    const before = await listTotal('/api/v1/users?size=1');
    const duplicate = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: 'Again', email: user.email, password: 'correct horse battery' },
    });
    expect(duplicate.statusCode).toBe(409);
    expect((await api({ method: 'DELETE', url: `/api/v1/users/${user.id}` })).statusCode).toBe(204);
    expect((await api({ method: 'DELETE', url: `/api/v1/users/${user.id}` })).statusCode).toBe(204);
    expect(await listTotal('/api/v1/users?size=1')).toBe(before - 1);
    await expectExactTotals();
  });

  it('follow rows written by SQL alone (a bulk load, a TRUNCATE), as the triggers see every statement', async () => {
    await sql`insert into users (name, email, password_hash)
      select 'Bulk ' || g, 'bulk' || g || '@example.com', 'x' from generate_series(1, 500) g`.execute(app.db);
    await sql`update orders set status = 'CANCELLED' where status = 'PENDING'`.execute(app.db);
    await expectExactTotals();
    await sql`delete from users where name like 'Bulk %'`.execute(app.db);
    await expectExactTotals();
    await sql`truncate order_items, orders`.execute(app.db);
    expect(await listTotal('/api/v1/orders?size=1')).toBe(0);
    await expectExactTotals();
  });
});
