// spec 9.3-9.4: v1 is frozen. These tests pin the exact members (names, order and JSON types)
// of every v1 response and problem shape; a change that alters one fails here, and needs a
// new major version instead.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

/** Member names and JSON types, in order: { id: 'number', note: 'null', ... }. */
function shape(value: unknown): Record<string, string> {
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [
      k,
      v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v,
    ]),
  );
}

const USER = { id: 'number', name: 'string', email: 'string', createdAt: 'string' };
const PAGE = {
  content: 'array',
  totalElements: 'number',
  totalPages: 'number',
  number: 'number',
  size: 'number',
  first: 'boolean',
  last: 'boolean',
};
const ORDER_DETAIL = {
  id: 'number',
  customerId: 'number',
  status: 'string',
  total: 'number',
  note: 'null',
  shippingAddress: 'null',
  cancellationReason: 'null',
  createdAt: 'string',
  updatedAt: 'string',
};
const PROBLEM = { type: 'string', title: 'string', status: 'number', detail: 'string', instance: 'string' };

describe('v1 response shapes', () => {
  it('UserResponse and its page', async () => {
    const user = await createUser(app);

    expect(shape(user)).toEqual(USER);
    const page = (await api({ method: 'GET', url: '/api/v1/users?size=1' })).json();
    expect(shape(page)).toEqual(PAGE);
    expect(shape(page.content[0])).toEqual(USER);
    for (const method of ['PUT', 'PATCH'] as const) {
      const updated = await api({
        method,
        url: `/api/v1/users/${user.id}`,
        payload: { name: 'Frozen Name', email: user.email, age: 33, address: { street: 'x', postalCode: '12345' } },
      });
      expect(shape(updated.json()), method).toEqual(USER);
    }
  });

  it('OrderDetail, OrderSummary, OrderItem', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 10);
    const created = await placeOrder(app, customer.auth, product.id, 2);

    expect(shape(created.json())).toEqual(ORDER_DETAIL);
    const id = created.json().id;
    expect(shape((await api({ method: 'GET', url: `/api/v1/orders/${id}` })).json())).toEqual(ORDER_DETAIL);
    const page = (await api({ method: 'GET', url: `/api/v1/orders?customerId=${customer.id}` })).json();
    expect(shape(page)).toEqual(PAGE);
    expect(shape(page.content[0])).toEqual({
      id: 'number',
      customerId: 'number',
      status: 'string',
      total: 'number',
      itemCount: 'number',
      createdAt: 'string',
    });
    const items = (await api({ method: 'GET', url: `/api/v1/orders/${id}/items` })).json();
    expect(shape(items[0])).toEqual({
      productId: 'number',
      productName: 'string',
      quantity: 'number',
      unitPrice: 'number',
      lineTotal: 'number',
    });
    const patched = (
      await api({
        method: 'PATCH',
        url: `/api/v1/orders/${id}`,
        payload: { note: 'n', shippingAddress: { street: 's', postalCode: '12345' } },
      })
    ).json();
    expect(shape(patched)).toEqual({ ...ORDER_DETAIL, note: 'string', shippingAddress: 'object' });
    expect(Object.keys(patched.shippingAddress)).toEqual(['street', 'postalCode']);
    for (const [noun, payload] of [
      ['confirmation', undefined],
      ['cancellation', { reason: 'r' }],
    ] as const) {
      const acted = (
        await api({ method: 'POST', url: `/api/v1/orders/${id}/${noun}`, ...(payload ? { payload } : {}) })
      ).json();
      expect(Object.keys(acted), noun).toEqual(Object.keys(ORDER_DETAIL));
    }
  });
});

describe('v1 problem shapes', () => {
  it('users: validation, not found, conflict, business rule', async () => {
    const user = await createUser(app);

    const validation = (await api({ method: 'POST', url: '/api/v1/users', payload: {} })).json();
    const missing = (await api({ method: 'GET', url: '/api/v1/users/987654321' })).json();
    const conflict = (
      await api({
        method: 'POST',
        url: '/api/v1/users',
        payload: { name: 'Dup', email: user.email, password: 'password-1' },
      })
    ).json();
    const rule = (
      await api({
        method: 'POST',
        url: `/api/v1/users/${user.id}/password-changes`,
        payload: { currentPassword: 'wrong-one', newPassword: 'password-2' },
      })
    ).json();

    expect(shape(validation)).toEqual({ ...PROBLEM, errors: 'array' });
    expect(validation).toMatchObject({ type: 'about:blank', title: 'Validation Error', detail: 'Validation failed' });
    expect(Object.keys(validation.errors[0])).toEqual(['field', 'message', 'rejected']);
    expect(shape(missing)).toEqual(PROBLEM);
    expect(missing.title).toBe('Entity Not Found');
    expect(shape(conflict)).toEqual({ ...PROBLEM, conflictingField: 'string' });
    expect(conflict).toMatchObject({ type: 'about:blank', title: 'Conflict' });
    expect(shape(rule)).toEqual(PROBLEM);
  });

  it('orders: validation, not found, already cancelled, invalid state, business rule', async () => {
    const customer = await aCustomer(app);
    const product = await createProduct(app, {}, 1);
    const order = (await placeOrder(app, customer.auth, product.id, 1)).json();
    await api({ method: 'POST', url: `/api/v1/orders/${order.id}/cancellation`, payload: { reason: 'r' } });

    const validation = (await api({ method: 'POST', url: '/api/v1/orders', payload: {} })).json();
    const missing = (await api({ method: 'GET', url: '/api/v1/orders/987654321' })).json();
    const cancelled = (
      await api({ method: 'POST', url: `/api/v1/orders/${order.id}/cancellation`, payload: { reason: 'r' } })
    ).json();
    const state = (await api({ method: 'POST', url: `/api/v1/orders/${order.id}/shipment` })).json();
    const rule = (await placeOrder(app, customer.auth, product.id, 5)).json();

    expect(shape(validation)).toEqual({ ...PROBLEM, errors: 'array' });
    expect(validation).toMatchObject({ type: 'about:blank', title: 'Bad Request', detail: 'Invalid request content.' });
    expect(typeof validation.errors[0]).toBe('string');
    expect(shape(missing)).toEqual({ ...PROBLEM, orderId: 'number' });
    expect(missing).toMatchObject({ type: 'about:blank', title: 'Order not found' });
    expect(shape(cancelled)).toEqual(PROBLEM);
    expect(cancelled.title).toBe('Order already cancelled');
    expect(shape(state)).toEqual({ ...PROBLEM, currentStatus: 'string' });
    expect(state.title).toBe('Invalid order state');
    expect(shape(rule)).toEqual({ ...PROBLEM, productId: 'number' });
    expect(rule.title).toBe('Business Rule Violation');
  });

  it('authentication and framework problems', async () => {
    const unauthenticated = (await app.inject({ method: 'GET', url: '/api/v1/users/1' })).json();
    const forbidden = (
      await app.inject({
        method: 'GET',
        url: '/api/v1/users',
        headers: { authorization: await bearer({ sub: '1', scope: 'orders:read' }) },
      })
    ).json();
    const notFound = (await api({ method: 'GET', url: '/api/v1/nowhere' })).json();
    const method = (await api({ method: 'PUT', url: '/api/v1/orders' })).json();

    for (const problem of [unauthenticated, forbidden, notFound, method]) expect(shape(problem)).toEqual(PROBLEM);
  });
});
