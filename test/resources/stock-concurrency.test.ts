// docs/api-guide.md#products-and-stock, docs/api-guide.md#orders: stock never oversells. Many parallel orders for a product with little stock
// end with exactly as many successes as units; parallel cancellations release once.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, placeOrder, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

describe('stock under concurrency', () => {
  it('gives as many orders as units, answers the rest 422, and keeps available + reserved', async () => {
    const product = await createProduct(app, { price: 1 }, 5);
    const customers = await Promise.all(Array.from({ length: 4 }, () => aCustomer(app)));

    const responses = await Promise.all(
      Array.from({ length: 24 }, (_, i) => placeOrder(app, customers[i % 4]!.auth, product.id, 1)),
    );

    const statuses = responses.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(5);
    expect(statuses.filter((s) => s === 422)).toHaveLength(19);
    expect(await stockOf(app, product.id)).toEqual({ available: 0, reserved: 5 });
  });

  it('never oversells with mixed quantities', async () => {
    const product = await createProduct(app, { price: 1 }, 10);
    const customer = await aCustomer(app);

    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => placeOrder(app, customer.auth, product.id, (i % 3) + 2)),
    );

    const reserved = responses
      .filter((r) => r.statusCode === 201)
      .reduce((sum, r) => sum + (r.json().total as number), 0);
    const stock = await stockOf(app, product.id);
    expect(stock.reserved).toBe(reserved);
    expect(stock.available + stock.reserved).toBe(10);
    expect(stock.available).toBeLessThan(2);
  });

  it('releases a cancelled order’s stock once, however many cancellations race', async () => {
    const product = await createProduct(app, { price: 1 }, 10);
    const customer = await aCustomer(app);
    const order = (await placeOrder(app, customer.auth, product.id, 4)).json();

    const responses = await Promise.all(
      Array.from({ length: 10 }, () =>
        api({ method: 'POST', url: `/api/v1/orders/${order.id}/cancellation`, payload: { reason: 'race' } }),
      ),
    );

    expect(responses.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
  });

  it('releases once when cancellation and deletion race', async () => {
    const product = await createProduct(app, { price: 1 }, 10);
    const customer = await aCustomer(app);
    const order = (await placeOrder(app, customer.auth, product.id, 4)).json();

    await Promise.all([
      api({ method: 'POST', url: `/api/v1/orders/${order.id}/cancellation`, payload: { reason: 'race' } }),
      api({ method: 'DELETE', url: `/api/v1/orders/${order.id}` }),
      api({ method: 'POST', url: `/api/v1/orders/${order.id}/cancellation`, payload: { reason: 'race' } }),
    ]);

    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
  });
});
