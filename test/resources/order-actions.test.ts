// The action sub-resources of docs/api-guide.md#orders through HTTP: each transition, its stock movement,
// and the 409s of the state machine.
import { describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, placeOrder, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const action = (id: number, noun: string, payload?: unknown, headers: Record<string, string> = {}) =>
  api({
    method: 'POST',
    url: `/api/v1/orders/${id}/${noun}`,
    headers,
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

async function anOrder(quantity = 3, available = 10) {
  const customer = await aCustomer(app);
  const product = await createProduct(app, { price: 4 }, available);
  const order = (await placeOrder(app, customer.auth, product.id, quantity)).json();
  return { order, product, customer };
}

describe('order lifecycle', () => {
  it('confirms, ships and delivers; shipping takes the units out of reserved', async () => {
    const { order, product } = await anOrder(3, 10);

    const confirmed = await action(order.id, 'confirmation');
    const afterConfirm = await stockOf(app, product.id);
    const shipped = await action(order.id, 'shipment', {});
    const afterShip = await stockOf(app, product.id);
    const delivered = await action(order.id, 'delivery', '', { 'content-type': 'application/json' });

    expect(confirmed.statusCode).toBe(200);
    expect(confirmed.json()).toMatchObject({ id: order.id, status: 'CONFIRMED' });
    expect(afterConfirm).toEqual({ available: 7, reserved: 3 });
    expect(shipped.json().status).toBe('SHIPPED');
    expect(afterShip).toEqual({ available: 7, reserved: 0 });
    expect(delivered.statusCode).toBe(200);
    expect(delivered.json().status).toBe('DELIVERED');
    expect(await stockOf(app, product.id)).toEqual({ available: 7, reserved: 0 });
  });

  it('cancels a pending order with a reason and releases its stock', async () => {
    const { order, product } = await anOrder(3, 10);

    const response = await action(order.id, 'cancellation', { reason: 'Found it cheaper' });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      id: order.id,
      status: 'CANCELLED',
      cancellationReason: 'Found it cheaper',
    });
    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
  });

  it('cancels a confirmed order too', async () => {
    const { order, product } = await anOrder(2, 5);
    await action(order.id, 'confirmation');

    const response = await action(order.id, 'cancellation', { reason: 'No longer needed' });

    expect(response.json().status).toBe('CANCELLED');
    expect(await stockOf(app, product.id)).toEqual({ available: 5, reserved: 0 });
  });

  it('answers a second cancellation with 409 "Order already cancelled" and releases nothing twice', async () => {
    const { order, product } = await anOrder(3, 10);
    await action(order.id, 'cancellation', { reason: 'first' });

    const response = await action(order.id, 'cancellation', { reason: 'second' });

    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Order already cancelled',
      status: 409,
      detail: `Order ${order.id} is already cancelled.`,
      instance: `/api/v1/orders/${order.id}/cancellation`,
    });
    expect(await stockOf(app, product.id)).toEqual({ available: 10, reserved: 0 });
  });

  it.each([
    ['shipment', 'PENDING', 'shipped'],
    ['delivery', 'PENDING', 'delivered'],
  ])('answers %s of a %s order with 409 Invalid order state and currentStatus', async (noun, status, past) => {
    const { order } = await anOrder();

    const response = await action(order.id, noun);

    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Invalid order state',
      status: 409,
      detail: `Order ${order.id} is ${status}; it cannot be ${past}.`,
      instance: `/api/v1/orders/${order.id}/${noun}`,
      currentStatus: status,
    });
  });

  it('refuses to cancel a shipped order', async () => {
    const { order, product } = await anOrder(3, 10);
    await action(order.id, 'confirmation');
    await action(order.id, 'shipment');

    const response = await action(order.id, 'cancellation', { reason: 'too late' });

    expect(response.statusCode).toBe(409);
    expect(response.json()).toMatchObject({ title: 'Invalid order state', currentStatus: 'SHIPPED' });
    expect(await stockOf(app, product.id)).toEqual({ available: 7, reserved: 0 });
  });

  it('needs a reason to cancel: no body is 400 "reason: must not be blank"', async () => {
    const { order } = await anOrder();

    const none = await action(order.id, 'cancellation');
    const blank = await action(order.id, 'cancellation', { reason: '   ' });

    expect(none.statusCode).toBe(400);
    expect(none.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'Invalid request content.',
      instance: `/api/v1/orders/${order.id}/cancellation`,
      errors: ['reason: must not be blank'],
    });
    expect(blank.json().errors).toEqual(['reason: must not be blank']);
  });

  it('answers an action on a missing order with 404 "Order not found"', async () => {
    const response = await action(987654321, 'confirmation');

    expect(response.statusCode).toBe(404);
    expect(response.json()).toMatchObject({ title: 'Order not found', orderId: 987654321 });
  });
});

describe('who may act (function-level authorization, OWASP API5)', () => {
  const asCustomer = (auth: string, id: number, noun: string) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/orders/${id}/${noun}`,
      headers: { authorization: auth },
      ...(noun === 'cancellation' ? { payload: { reason: 'Changed my mind' } } : {}),
    });

  it('lets a customer confirm and cancel its own order, but not ship or deliver it (403)', async () => {
    const { order, customer } = await anOrder(1, 10);
    const confirmed = await asCustomer(customer.auth, order.id, 'confirmation');
    expect(confirmed.statusCode, confirmed.body).toBe(200);

    for (const noun of ['shipment', 'delivery']) {
      const refused = await asCustomer(customer.auth, order.id, noun);
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="admin"');
      expect(refused.json()).toMatchObject({ title: 'Forbidden', status: 403 });
    }
    // Nothing moved: the order is still confirmed, and the merchant can ship it.
    const read = await api({ method: 'GET', url: `/api/v1/orders/${order.id}` });
    expect(read.json().status).toBe('CONFIRMED');
    expect((await action(order.id, 'shipment')).json().status).toBe('SHIPPED');
    expect((await asCustomer(customer.auth, order.id, 'delivery')).statusCode).toBe(403);
    expect((await action(order.id, 'delivery')).json().status).toBe('DELIVERED');

    const other = await anOrder(1, 10);
    expect((await asCustomer(other.customer.auth, other.order.id, 'cancellation')).statusCode).toBe(200);
  });

  it('answers 403 for shipping any order without admin, so that it tells nothing of orders that are not the caller’s', async () => {
    const { customer } = await anOrder(1, 10);
    const { order: someoneElses } = await anOrder(1, 10);
    expect((await asCustomer(customer.auth, someoneElses.id, 'shipment')).statusCode).toBe(403);
    expect((await asCustomer(customer.auth, 999_999_999, 'shipment')).statusCode).toBe(403);
    expect((await asCustomer(customer.auth, someoneElses.id, 'confirmation')).statusCode).toBe(404);
  });
});
