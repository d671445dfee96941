// /api/v2/orders (spec 2.2 second create variant, docs/api-guide.md#versions): customer and items, typed problems.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const TYPES = 'http://localhost:8080/api/public/problems';
const create = (auth: string, payload: unknown) =>
  app.inject({ method: 'POST', url: '/api/v2/orders', headers: { authorization: auth }, payload: payload as object });

describe('POST /api/v2/orders', () => {
  it('places an order of several items, reserving each, with an exact total', async () => {
    const customer = await aCustomer(app);
    const mug = await createProduct(app, { price: 12.5, name: 'Mug' }, 10);
    const tee = await createProduct(app, { price: 19.99, name: 'Tee' }, 10);

    const response = await create(customer.auth, {
      customerId: customer.id,
      items: [
        { productId: tee.id, quantity: 3 },
        { productId: mug.id, quantity: 2 },
      ],
    });

    expect(response.statusCode).toBe(201);
    const order = response.json();
    expect(order).toMatchObject({ customerId: customer.id, status: 'PENDING', total: 84.97 });
    expect(response.headers.location).toMatch(new RegExp(`/api/v2/orders/${order.id}$`));
    expect(await stockOf(app, tee.id)).toEqual({ available: 7, reserved: 3 });
    expect(await stockOf(app, mug.id)).toEqual({ available: 8, reserved: 2 });
    const items = await app.inject({
      method: 'GET',
      url: `/api/v2/orders/${order.id}/items`,
      headers: { authorization: customer.auth },
    });
    expect(items.json()).toEqual([
      { productId: mug.id, productName: 'Mug', quantity: 2, unitPrice: 12.5, lineTotal: 25 },
      { productId: tee.id, productName: 'Tee', quantity: 3, unitPrice: 19.99, lineTotal: 59.97 },
    ]);
  });

  it('rejects an empty item list with "Order must have at least one item"', async () => {
    const customer = await aCustomer(app);

    const response = await create(customer.auth, { customerId: customer.id, items: [] });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: `${TYPES}/validation-failed`,
      title: 'Validation Failed',
      status: 400,
      detail: 'Validation failed',
      instance: '/api/v2/orders',
      fieldErrors: [{ field: 'items', message: 'Order must have at least one item' }],
    });
  });

  it('names nested item fields in its errors', async () => {
    const customer = await aCustomer(app);

    const response = await create(customer.auth, { items: [{ productId: 1, quantity: 0 }, { quantity: 2 }] });

    expect(response.json().fieldErrors).toEqual([
      { field: 'customerId', message: 'must not be null' },
      { field: 'items[0].quantity', message: 'must be greater than 0' },
      { field: 'items[1].productId', message: 'must not be null' },
    ]);
  });

  it('reserves nothing when one line is short: the whole order rolls back', async () => {
    const customer = await aCustomer(app);
    const plenty = await createProduct(app, {}, 10);
    const scarce = await createProduct(app, {}, 1);

    const response = await create(customer.auth, {
      customerId: customer.id,
      items: [
        { productId: plenty.id, quantity: 5 },
        { productId: scarce.id, quantity: 2 },
      ],
    });

    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({ type: `${TYPES}/business-rule-violation`, productId: scarce.id });
    expect(await stockOf(app, plenty.id)).toEqual({ available: 10, reserved: 0 });
    expect(await stockOf(app, scarce.id)).toEqual({ available: 1, reserved: 0 });
  });

  it('needs admin to order for another customer, and refuses an unknown customer with 422', async () => {
    const customer = await aCustomer(app);
    const other = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const line = [{ productId: product.id, quantity: 1 }];

    const forbidden = await create(customer.auth, { customerId: other.id, items: line });
    const byAdmin = await api({
      method: 'POST',
      url: '/api/v2/orders',
      payload: { customerId: other.id, items: line },
    });
    const unknown = await api({
      method: 'POST',
      url: '/api/v2/orders',
      payload: { customerId: 987654321, items: line },
    });

    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="admin"');
    expect(byAdmin.statusCode).toBe(201);
    expect(byAdmin.json().customerId).toBe(other.id);
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json()).toMatchObject({ detail: 'Customer 987654321 does not exist.', customerId: 987654321 });
  });

  it('sums the lines in exact decimals (0.10 + 0.20 is 0.30, not 0.30000000000000004)', async () => {
    const customer = await aCustomer(app);
    const dime = await createProduct(app, { price: 0.1 }, 10);
    const twenty = await createProduct(app, { price: 0.2 }, 10);

    const response = await create(customer.auth, {
      customerId: customer.id,
      items: [
        { productId: dime.id, quantity: 1 },
        { productId: twenty.id, quantity: 1 },
      ],
    });

    expect(response.statusCode).toBe(201);
    expect(response.body).toContain('"total":0.3,');
  });

  it('names the first short line in product order, with what is available, and reserves nothing', async () => {
    const customer = await aCustomer(app);
    const scarce = await createProduct(app, {}, 1);
    const alsoScarce = await createProduct(app, {}, 0);
    const plenty = await createProduct(app, {}, 10);

    const response = await create(customer.auth, {
      customerId: customer.id,
      items: [
        { productId: plenty.id, quantity: 1 },
        { productId: alsoScarce.id, quantity: 1 },
        { productId: scarce.id, quantity: 3 },
      ],
    });

    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({
      detail: `Not enough stock for product ${scarce.id}: 3 requested, 1 available.`,
      productId: scarce.id,
    });
    expect(await stockOf(app, plenty.id)).toEqual({ available: 10, reserved: 0 });
    expect(await stockOf(app, scarce.id)).toEqual({ available: 1, reserved: 0 });
  });

  it('places concurrent orders of the same products listed in opposite orders (no deadlock)', async () => {
    const customer = await aCustomer(app);
    const a = await createProduct(app, {}, 100);
    const b = await createProduct(app, {}, 100);
    const c = await createProduct(app, {}, 100);
    const forward = [a, b, c].map((p) => ({ productId: p.id, quantity: 1 }));

    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        create(customer.auth, { customerId: customer.id, items: i % 2 === 0 ? forward : [...forward].reverse() }),
      ),
    );

    expect(responses.map((r) => r.statusCode)).toEqual(responses.map(() => 201));
    for (const p of [a, b, c]) expect(await stockOf(app, p.id)).toEqual({ available: 70, reserved: 30 });
  });

  it('adds up repeated lines for one product', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 1 }, 10);

    const response = await create(customer.auth, {
      customerId: customer.id,
      items: [
        { productId: product.id, quantity: 2 },
        { productId: product.id, quantity: 3 },
      ],
    });

    expect(response.json().total).toBe(5);
    expect(await stockOf(app, product.id)).toEqual({ available: 5, reserved: 5 });
  });
});

describe('other /api/v2/orders routes use the typed form', () => {
  it('answers a missing order with entity-not-found', async () => {
    const response = await api({ method: 'GET', url: '/api/v2/orders/987654321' });

    expect(response.json()).toEqual({
      type: `${TYPES}/entity-not-found`,
      title: 'Entity Not Found',
      status: 404,
      detail: 'Order 987654321 not found',
      instance: '/api/v2/orders/987654321',
    });
  });

  it('answers state conflicts with the typed conflict and currentStatus', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (
      await create(customer.auth, { customerId: customer.id, items: [{ productId: product.id, quantity: 1 }] })
    ).json();
    await api({ method: 'POST', url: `/api/v2/orders/${order.id}/cancellation`, payload: { reason: 'test' } });

    const again = await api({
      method: 'POST',
      url: `/api/v2/orders/${order.id}/cancellation`,
      payload: { reason: 'again' },
    });
    const ship = await api({ method: 'POST', url: `/api/v2/orders/${order.id}/shipment` });
    const noReason = await api({ method: 'POST', url: `/api/v2/orders/${order.id}/cancellation` });

    expect(again.json()).toEqual({
      type: `${TYPES}/conflict`,
      title: 'Conflict',
      status: 409,
      detail: `Order ${order.id} is already cancelled.`,
      instance: `/api/v2/orders/${order.id}/cancellation`,
    });
    expect(ship.json()).toEqual({
      type: `${TYPES}/conflict`,
      title: 'Conflict',
      status: 409,
      detail: `Order ${order.id} is CANCELLED; it cannot be shipped.`,
      instance: `/api/v2/orders/${order.id}/shipment`,
      currentStatus: 'CANCELLED',
    });
    expect(noReason.json()).toMatchObject({
      title: 'Validation Failed',
      fieldErrors: [{ field: 'reason', message: 'must not be blank' }],
    });
  });
});
