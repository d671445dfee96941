// Orders that arrive together share one statement (orders.repository.ts placeStatement,
// db/batcher.ts): each still gets its own verdict, its own items and its own event, as if they
// had been placed one after another.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ADMIN } from '../support/tokens.js';
import { aCustomer, asAdmin, createProduct, placeOrder, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

/** The order.created events of these orders: the writing transaction and the data of each. */
async function createdEvents(orderIds: number[]) {
  const { rows } = await sql<{ subject: string; tx: string; data: string }>`
    select subject, tx::text as tx, data from events
     where type = 'order.created' and subject = any(${orderIds.map((id) => `orders/${id}`)})`.execute(app.db);
  return rows;
}

/** v2 for an order of several lines (customerId and items), v1 for one line. */
const order = (payload: Record<string, unknown>, auth = ADMIN) =>
  api({
    method: 'POST',
    url: 'items' in payload ? '/api/v2/orders' : '/api/v1/orders',
    headers: { authorization: auth },
    payload,
  });

describe('orders placed together', () => {
  it('share statements, and each has its own items, total and event', async () => {
    const products = await Promise.all(
      Array.from({ length: 4 }, (_, i) => createProduct(app, { price: 1.25 + i }, 100)),
    );
    const customers = await Promise.all(Array.from({ length: 4 }, () => aCustomer(app)));

    const responses = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        order(
          {
            customerId: customers[i % 4]!.id,
            items: [
              { productId: products[i % 4]!.id, quantity: 1 + (i % 3) },
              { productId: products[(i + 1) % 4]!.id, quantity: 2 },
            ],
          },
          customers[i % 4]!.auth,
        ),
      ),
    );

    expect(
      responses.map((r) => r.statusCode),
      responses[0]!.body,
    ).toEqual(Array(24).fill(201));
    const placed = responses.map((r) => r.json());
    placed.forEach((o, i) => {
      expect(o.customerId).toBe(customers[i % 4]!.id);
      expect(o.total).toBeCloseTo((1.25 + (i % 4)) * (1 + (i % 3)) + (1.25 + ((i + 1) % 4)) * 2, 2);
    });
    expect(new Set(placed.map((o) => o.id)).size).toBe(24);

    // Each order's items, in the order they were asked for (line numbers by product).
    for (const [i, o] of placed.entries()) {
      const items = await api({ method: 'GET', url: `/api/v1/orders/${o.id}/items` });
      const expected = [
        { productId: products[i % 4]!.id, quantity: 1 + (i % 3) },
        { productId: products[(i + 1) % 4]!.id, quantity: 2 },
      ].sort((a, b) => a.productId - b.productId);
      expect(
        items.json().map((item: { productId: number; quantity: number }) => [item.productId, item.quantity]),
      ).toEqual(expected.map((e) => [e.productId, e.quantity]));
    }

    // One event each, whose data is the order as its answer showed it; fewer transactions than orders.
    const events = await createdEvents(placed.map((o) => o.id));
    expect(events).toHaveLength(24);
    for (const o of placed) expect(JSON.parse(events.find((e) => e.subject === `orders/${o.id}`)!.data)).toEqual(o);
    expect(new Set(events.map((e) => e.tx)).size).toBeLessThan(24);

    // Every unit accounted for.
    for (const [p, product] of products.entries()) {
      const wanted = placed
        .flatMap((_, i) => [
          [products[i % 4]!.id, 1 + (i % 3)],
          [products[(i + 1) % 4]!.id, 2],
        ])
        .filter(([id]) => id === product.id)
        .reduce((sum, [, quantity]) => sum + quantity!, 0);
      expect(await stockOf(app, product.id), `product ${p}`).toEqual({ available: 100 - wanted, reserved: wanted });
    }
  });

  it('answers each order that cannot be placed with its own reason, and places its neighbours', async () => {
    const product = await createProduct(app, { price: 2 }, 10);
    const scarce = await createProduct(app, { price: 3 }, 1);
    const unstocked = await createProduct(app, { price: 4 });
    const customer = await aCustomer(app);

    const [ok1, noCustomer, noProduct, tooMany, ok2, unstockedLine] = await Promise.all([
      order({ productId: product.id, quantity: 3 }, customer.auth),
      order({ customerId: 2_000_000_000, items: [{ productId: product.id, quantity: 1 }] }),
      order({ productId: 2_000_000_000, quantity: 1 }, customer.auth),
      order({ productId: scarce.id, quantity: 2 }, customer.auth),
      order(
        {
          customerId: customer.id,
          items: [
            { productId: product.id, quantity: 2 },
            { productId: scarce.id, quantity: 1 },
          ],
        },
        customer.auth,
      ),
      order(
        {
          customerId: customer.id,
          items: [
            { productId: product.id, quantity: 1 },
            { productId: unstocked.id, quantity: 1 },
          ],
        },
        customer.auth,
      ),
    ]);

    expect([ok1, ok2].map((r) => r.statusCode)).toEqual([201, 201]);
    expect(noCustomer.statusCode).toBe(422);
    expect(noCustomer.json().detail).toBe('Customer 2000000000 does not exist.');
    expect(noProduct.statusCode).toBe(422);
    expect(noProduct.json().detail).toBe('Product 2000000000 does not exist.');
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().detail).toMatch(
      new RegExp(`^Not enough stock for product ${scarce.id}: 2 requested, [01] available\\.$`),
    );
    expect(unstockedLine.statusCode).toBe(422);
    expect(unstockedLine.json().detail).toMatch(
      new RegExp(`^Not enough stock for product ${unstocked.id}: 1 requested, 0 available\\.$`),
    );
    expect(await stockOf(app, product.id)).toEqual({ available: 5, reserved: 5 });
    expect(await stockOf(app, scarce.id)).toEqual({ available: 0, reserved: 1 });
  });

  it('places an order that an earlier one of its batch could not take from it', async () => {
    // One after another: 3 placed (2 left), 3 refused, 2 placed. Summing every earlier order's
    // demand would refuse the last; it is placed on its own after the batch instead.
    for (let round = 0; round < 5; round++) {
      const product = await createProduct(app, { price: 1 }, 5);
      const customer = await aCustomer(app);
      const responses = await Promise.all(
        [3, 3, 2].map((quantity) => placeOrder(app, customer.auth, product.id, quantity)),
      );
      const stock = await stockOf(app, product.id);
      const placed = responses.filter((r) => r.statusCode === 201).map((r) => r.json().total as number);
      expect(stock).toEqual({
        available: 5 - placed.reduce((a, b) => a + b, 0),
        reserved: placed.reduce((a, b) => a + b, 0),
      });
      // No order was refused that the stock left at the end could still have held.
      for (const [i, r] of responses.entries()) {
        if (r.statusCode === 201) continue;
        expect(r.statusCode).toBe(422);
        expect([3, 3, 2][i]).toBeGreaterThan(stock.available);
      }
      expect(placed.sort()).toEqual([2, 3]);
    }
  });

  it('keeps one order’s database error to that order', async () => {
    // 9,999,999,999.99 × 101 does not fit an order's total (numeric(14, 2)): that order's own error.
    const dear = await createProduct(app, { price: 9_999_999_999.99 }, 1000);
    const cheap = await createProduct(app, { price: 1 }, 1000);
    const customer = await aCustomer(app);

    const alone = await placeOrder(app, customer.auth, dear.id, 101);
    const responses = await Promise.all([
      placeOrder(app, customer.auth, cheap.id, 1),
      placeOrder(app, customer.auth, dear.id, 101),
      placeOrder(app, customer.auth, cheap.id, 2),
    ]);

    expect(alone.statusCode).toBe(400);
    expect(responses.map((r) => r.statusCode)).toEqual([201, alone.statusCode, 201]);
    const reason = ({ type, title, status, detail }: Record<string, unknown>) => ({ type, title, status, detail });
    expect(reason(responses[1].json())).toEqual(reason(alone.json()));
    expect(await stockOf(app, cheap.id)).toEqual({ available: 997, reserved: 3 });
    expect(await stockOf(app, dear.id)).toEqual({ available: 1000, reserved: 0 });
  });
  it('fans out each order’s event to the subscriptions, once each', async () => {
    // No dispatcher runs in tests (WEBHOOK_DISPATCHER=false): deliveries are written, never sent.
    const { rows } = await sql<{ id: number }>`
      insert into webhook_subscriptions (url, events, secret)
      values ('http://127.0.0.1:9/in', array['order.created'], 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
             ('http://127.0.0.1:9/all', array['*'], 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
      returning id`.execute(app.db);
    const subscriptions = rows.map((r) => r.id).sort((a, b) => a - b);
    try {
      const product = await createProduct(app, { price: 1 }, 100);
      const customer = await aCustomer(app);
      const responses = await Promise.all(
        Array.from({ length: 12 }, () => placeOrder(app, customer.auth, product.id, 1)),
      );
      expect(responses.map((r) => r.statusCode)).toEqual(Array(12).fill(201));
      const ids = responses.map((r) => r.json().id as number);

      const { rows: deliveries } = await sql<{ subject: string; subscriptions: number[] }>`
        select e.subject, array_agg(d.subscription_id order by d.subscription_id) as subscriptions
          from events e join webhook_deliveries d on d.event_sequence = e.sequence
         where e.type = 'order.created' and e.subject = any(${ids.map((id) => `orders/${id}`)})
         group by e.subject`.execute(app.db);
      expect(deliveries.map((d) => d.subject).sort()).toEqual(ids.map((id) => `orders/${id}`).sort());
      for (const d of deliveries) expect(d.subscriptions.map(Number)).toEqual(subscriptions);
      expect(new Set((await createdEvents(ids)).map((e) => e.tx)).size).toBeLessThan(12);
    } finally {
      await sql`delete from webhook_subscriptions where id = any(${subscriptions})`.execute(app.db);
    }
  });
});
