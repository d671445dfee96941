// /api/v1/orders (spec 4.2, docs/api-guide.md#orders): every row, the v1 order problem forms, ownership.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, placeOrder, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const as = (auth: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  app.inject({
    method,
    url,
    headers: { authorization: auth },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

describe('POST /api/v1/orders', () => {
  it('places an order for the caller: 201, absolute Location, exact total, stock reserved', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 19.99 }, 10);

    const response = await app.inject({
      method: 'POST',
      url: '/api/v1/orders',
      headers: { authorization: customer.auth, host: 'api.test' },
      payload: { productId: product.id, quantity: 3 },
    });

    expect(response.statusCode).toBe(201);
    const order = response.json();
    expect(order).toEqual({
      id: expect.any(Number),
      customerId: customer.id,
      status: 'PENDING',
      total: 59.97,
      note: null,
      shippingAddress: null,
      cancellationReason: null,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: expect.stringMatching(/Z$/),
    });
    expect(response.body).toContain('"total":59.97,');
    expect(response.headers.location).toBe(`http://api.test/api/v1/orders/${order.id}`);
    expect(response.headers['cache-control']).toBe('no-store');
    expect(await stockOf(app, product.id)).toEqual({ available: 7, reserved: 3 });
  });

  it('answers validation failures in the v1 orders form', async () => {
    const customer = await aCustomer(app);

    const empty = await as(customer.auth, 'POST', '/api/v1/orders');
    const bad = await as(customer.auth, 'POST', '/api/v1/orders', { productId: 'x', quantity: 0 });

    expect(empty.statusCode).toBe(400);
    expect(empty.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'Invalid request content.',
      instance: '/api/v1/orders',
      errors: ['productId: must not be null', 'quantity: must not be null'],
    });
    expect(bad.json().errors).toEqual(['productId: must be an integer', 'quantity: must be greater than 0']);
  });

  it('answers short stock with 422 business-rule-violation naming the productId, and reserves nothing', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 2);

    const response = await placeOrder(app, customer.auth, product.id, 3);

    expect(response.statusCode).toBe(422);
    expect(response.json()).toEqual({
      type: 'http://localhost:8080/api/public/problems/business-rule-violation',
      title: 'Business Rule Violation',
      status: 422,
      detail: `Not enough stock for product ${product.id}: 3 requested, 2 available.`,
      instance: '/api/v1/orders',
      productId: product.id,
    });
    expect(await stockOf(app, product.id)).toEqual({ available: 2, reserved: 0 });
  });

  it('answers an unknown product with 422', async () => {
    const customer = await aCustomer(app);

    const response = await placeOrder(app, customer.auth, 987654321, 1);

    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({
      title: 'Business Rule Violation',
      detail: 'Product 987654321 does not exist.',
      productId: 987654321,
    });
  });

  it('answers a caller that is not an existing user with 422', async () => {
    const product = await createProduct(app, {}, 5);
    const ghost = await bearer({ sub: '987654321', scope: 'orders:write' });

    const response = await placeOrder(app, ghost, product.id, 1);

    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({ detail: 'Customer 987654321 does not exist.', customerId: 987654321 });
    expect(await stockOf(app, product.id)).toEqual({ available: 5, reserved: 0 });
  });
});

describe('GET /api/v1/orders/{id} and /items', () => {
  it('returns the order and its items', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 2.5, name: 'Widget' }, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 4)).json();

    const detail = await as(customer.auth, 'GET', `/api/v1/orders/${order.id}`);
    const items = await as(customer.auth, 'GET', `/api/v1/orders/${order.id}/items`);

    expect(detail.statusCode).toBe(200);
    expect(detail.json()).toEqual(order);
    expect(items.statusCode).toBe(200);
    expect(items.json()).toEqual([
      { productId: product.id, productName: 'Widget', quantity: 4, unitPrice: 2.5, lineTotal: 10 },
    ]);
  });

  it('answers a missing order with 404 "Order not found" and orderId', async () => {
    const detail = await api({ method: 'GET', url: '/api/v1/orders/987654321' });
    const items = await api({ method: 'GET', url: '/api/v1/orders/987654321/items' });

    expect(detail.statusCode).toBe(404);
    expect(detail.json()).toEqual({
      type: 'about:blank',
      title: 'Order not found',
      status: 404,
      detail: 'Order 987654321 not found',
      instance: '/api/v1/orders/987654321',
      orderId: 987654321,
    });
    expect(items.statusCode).toBe(404);
    expect(items.json().orderId).toBe(987654321);
  });

  it('answers a non-numeric id in the v1 orders form', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/orders/abc' });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ title: 'Bad Request', errors: ['id: must be an integer'] });
  });
});

describe('GET /api/v1/orders', () => {
  it('lists the caller’s orders only, newest first by default, with the envelope and headers', async () => {
    const customer = await aCustomer(app);
    const other = await aCustomer(app);
    const product = await createProduct(app, { price: 1 }, 100);
    const first = (await placeOrder(app, customer.auth, product.id, 1)).json();
    const second = (await placeOrder(app, customer.auth, product.id, 2)).json();
    await placeOrder(app, other.auth, product.id, 1);

    const response = await as(customer.auth, 'GET', '/api/v1/orders');

    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      content: [
        {
          id: second.id,
          customerId: customer.id,
          status: 'PENDING',
          total: 2,
          itemCount: 1,
          createdAt: second.createdAt,
        },
        {
          id: first.id,
          customerId: customer.id,
          status: 'PENDING',
          total: 1,
          itemCount: 1,
          createdAt: first.createdAt,
        },
      ],
      totalElements: 2,
      totalPages: 1,
      number: 0,
      size: 20,
      first: true,
      last: true,
    });
    expect(response.headers['x-total-count']).toBe('2');
    expect(response.headers.link).toContain('rel="first"');
  });

  it('shows an admin every order, filtered by status and customerId, sorted as asked', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, { price: 3 }, 100);
    const a = (await placeOrder(app, customer.auth, product.id, 5)).json();
    const b = (await placeOrder(app, customer.auth, product.id, 1)).json();
    const c = (await placeOrder(app, customer.auth, product.id, 3)).json();
    await api({ method: 'POST', url: `/api/v1/orders/${b.id}/cancellation`, payload: { reason: 'changed my mind' } });

    const pending = await api({
      method: 'GET',
      url: `/api/v1/orders?customerId=${customer.id}&status=PENDING&sort=total,asc`,
    });
    const cancelled = await api({ method: 'GET', url: `/api/v1/orders?customerId=${customer.id}&status=CANCELLED` });
    const paged = await api({
      method: 'GET',
      url: `/api/v1/orders?customerId=${customer.id}&sort=id,asc&size=2&page=1`,
    });

    expect(pending.json().content.map((o: { id: number }) => o.id)).toEqual([c.id, a.id]);
    expect(cancelled.json().content.map((o: { id: number }) => o.id)).toEqual([b.id]);
    expect(paged.json()).toMatchObject({
      totalElements: 3,
      totalPages: 2,
      number: 1,
      size: 2,
      first: false,
      last: true,
    });
    expect(paged.json().content.map((o: { id: number }) => o.id)).toEqual([c.id]);
    expect(paged.headers.link).toContain(`customerId=${customer.id}`);
    expect(paged.headers.link).toContain('sort=id%2Casc');
  });

  it('never shows a caller without admin another customer’s orders, even when asked by customerId', async () => {
    const customer = await aCustomer(app);
    const other = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    await placeOrder(app, other.auth, product.id, 1);

    const response = await as(customer.auth, 'GET', `/api/v1/orders?customerId=${other.id}`);

    expect(response.json()).toMatchObject({ content: [], totalElements: 0 });
  });

  it('answers bad query values in the v1 orders form', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/orders?status=LOST&sort=price,up&size=0' });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'Invalid request content.',
      instance: '/api/v1/orders',
      errors: [
        'size: must be greater than or equal to 1',
        'sort: must be <field>,<direction> with field one of id, createdAt, total, status and direction asc or desc',
        'status: must be one of PENDING, CONFIRMED, SHIPPED, DELIVERED, CANCELLED',
      ],
    });
  });

  it('clamps size above 100 to 100', async () => {
    expect((await api({ method: 'GET', url: '/api/v1/orders?size=1000' })).json().size).toBe(100);
  });
});

describe('PATCH /api/v1/orders/{id}', () => {
  it('changes the note and shipping address, and null clears them', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json();

    const set = await as(customer.auth, 'PATCH', `/api/v1/orders/${order.id}`, {
      note: 'Leave at the door',
      shippingAddress: { street: '1 Main St', postalCode: '12345' },
    });
    const keep = await as(customer.auth, 'PATCH', `/api/v1/orders/${order.id}`, { note: 'Ring twice' });
    const clear = await as(customer.auth, 'PATCH', `/api/v1/orders/${order.id}`, { note: null, shippingAddress: null });

    expect(set.statusCode).toBe(200);
    expect(set.json()).toMatchObject({
      note: 'Leave at the door',
      shippingAddress: { street: '1 Main St', postalCode: '12345' },
    });
    expect(keep.json()).toMatchObject({
      note: 'Ring twice',
      shippingAddress: { street: '1 Main St', postalCode: '12345' },
    });
    expect(clear.json()).toMatchObject({ note: null, shippingAddress: null });
  });

  it('validates in the v1 orders form', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json();

    const response = await as(customer.auth, 'PATCH', `/api/v1/orders/${order.id}`, {
      note: 'n'.repeat(501),
      shippingAddress: { street: ' ', postalCode: '1234' },
    });

    expect(response.statusCode).toBe(400);
    expect(response.json().errors).toEqual([
      'note: size must be between 0 and 500',
      'shippingAddress.postalCode: must be a 5-digit postal code',
      'shippingAddress.street: must not be blank',
    ]);
  });

  it('answers 409 Invalid order state once the order has shipped, and 404 for a missing one', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json();
    await api({ method: 'POST', url: `/api/v1/orders/${order.id}/confirmation` });
    await api({ method: 'POST', url: `/api/v1/orders/${order.id}/shipment` });

    const shipped = await as(customer.auth, 'PATCH', `/api/v1/orders/${order.id}`, { note: 'too late' });
    const missing = await api({ method: 'PATCH', url: '/api/v1/orders/987654321', payload: { note: 'x' } });

    expect(shipped.statusCode).toBe(409);
    expect(shipped.json()).toEqual({
      type: 'about:blank',
      title: 'Invalid order state',
      status: 409,
      detail: `Order ${order.id} is SHIPPED; it cannot be changed.`,
      instance: `/api/v1/orders/${order.id}`,
      currentStatus: 'SHIPPED',
    });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().title).toBe('Order not found');
  });
});

describe('DELETE /api/v1/orders/{id}', () => {
  it('deletes an unshipped order and gives its stock back; 204 again when gone', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 4)).json();

    const first = await as(customer.auth, 'DELETE', `/api/v1/orders/${order.id}`);
    const second = await as(customer.auth, 'DELETE', `/api/v1/orders/${order.id}`);

    expect([first.statusCode, second.statusCode]).toEqual([204, 204]);
    expect(first.body).toBe('');
    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
    expect((await api({ method: 'GET', url: `/api/v1/orders/${order.id}` })).statusCode).toBe(404);
  });

  it('gives nothing back for a shipped order', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 4)).json();
    await api({ method: 'POST', url: `/api/v1/orders/${order.id}/confirmation` });
    await api({ method: 'POST', url: `/api/v1/orders/${order.id}/shipment` });

    await api({ method: 'DELETE', url: `/api/v1/orders/${order.id}` });

    expect(await stockOf(app, product.id)).toEqual({ available: 6, reserved: 0 });
  });
});

describe('ownership (OWASP API1)', () => {
  it('answers every route on another customer’s order exactly as for a missing order', async () => {
    const owner = await aCustomer(app);
    const intruder = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, owner.auth, product.id, 2)).json();
    const routes: ['GET' | 'POST' | 'PATCH', string, unknown?][] = [
      ['GET', ''],
      ['GET', '/items'],
      ['PATCH', '', { note: 'mine now' }],
      ['POST', '/cancellation', { reason: 'mischief' }],
      ['POST', '/confirmation'],
    ];
    // Shipping and delivering are the merchant's (403 without admin on any order, one's own
    // included): a missing order and another customer's answer alike there too.
    for (const path of ['/shipment', '/delivery']) {
      const theirs = await as(intruder.auth, 'POST', `/api/v1/orders/${order.id}${path}`);
      const missing = await as(intruder.auth, 'POST', `/api/v1/orders/987654321${path}`);
      expect(theirs.statusCode, path).toBe(403);
      expect(theirs.json(), path).toEqual({ ...missing.json(), instance: `/api/v1/orders/${order.id}${path}` });
    }

    for (const [method, path, payload] of routes) {
      const theirs = await as(intruder.auth, method, `/api/v1/orders/${order.id}${path}`, payload);
      const missing = await as(intruder.auth, method, `/api/v1/orders/987654321${path}`, payload);
      expect(theirs.statusCode, `${method} ${path}`).toBe(404);
      expect(theirs.json(), `${method} ${path}`).toEqual({
        ...missing.json(),
        detail: `Order ${order.id} not found`,
        instance: `/api/v1/orders/${order.id}${path}`,
        orderId: order.id,
      });
    }
    const deleted = await as(intruder.auth, 'DELETE', `/api/v1/orders/${order.id}`);
    expect(deleted.statusCode).toBe(204);
    expect((await as(owner.auth, 'GET', `/api/v1/orders/${order.id}`)).json()).toEqual(order);
    expect(await stockOf(app, product.id)).toEqual({ available: 8, reserved: 2 });
  });

  it('keeps a deleted user’s orders', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json();

    await api({ method: 'DELETE', url: `/api/v1/users/${customer.id}` });

    expect((await api({ method: 'GET', url: `/api/v1/orders/${order.id}` })).json()).toMatchObject({
      id: order.id,
      customerId: customer.id,
    });
  });
});
