// spec 9.3: request bodies with unknown members are accepted and the members ignored, on
// every endpoint that takes a body, in every version.
import { describe, expect, it } from 'vitest';
import {
  aCustomer,
  aProductRequest,
  aUserRequest,
  asAdmin,
  createProduct,
  createUser,
  placeOrder,
} from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const EXTRA = {
  unknownMember: 'ignored',
  nested: { deeper: [1, 2] },
  id: 424242,
  status: 'DELIVERED',
  passwordHash: 'x',
};

type Case = [
  string,
  () => Promise<{
    method: 'POST' | 'PUT' | 'PATCH';
    url: string;
    payload: Record<string, unknown>;
    status: number;
    auth?: string;
    check?: (body: Record<string, unknown>) => void;
  }>,
];

const address = { street: '1 Main St', postalCode: '12345' };
const cases: Case[] = [
  ['POST /api/v1/users', async () => ({ method: 'POST', url: '/api/v1/users', payload: aUserRequest(), status: 201 })],
  [
    'PUT /api/v1/users/{id}',
    async () => {
      const u = await createUser(app);
      return {
        method: 'PUT',
        url: `/api/v1/users/${u.id}`,
        payload: { name: 'Put Name', email: u.email },
        status: 200,
        check: (b) => expect(b.id).toBe(u.id),
      };
    },
  ],
  [
    'PATCH /api/v1/users/{id}',
    async () => {
      const u = await createUser(app);
      return {
        method: 'PATCH',
        url: `/api/v1/users/${u.id}`,
        payload: { name: 'Patched' },
        status: 200,
        check: (b) => expect(b.id).toBe(u.id),
      };
    },
  ],
  [
    'POST /api/v1/users/{id}/password-changes',
    async () => {
      const u = await createUser(app, { password: 'old-password-1' });
      return {
        method: 'POST',
        url: `/api/v1/users/${u.id}/password-changes`,
        payload: { currentPassword: 'old-password-1', newPassword: 'new-password-1' },
        status: 204,
      };
    },
  ],
  [
    'POST /api/v1/users/{id}/password-resets',
    async () => {
      const u = await createUser(app);
      return { method: 'POST', url: `/api/v1/users/${u.id}/password-resets`, payload: {}, status: 202 };
    },
  ],
  [
    'POST /api/v2/users',
    async () => ({ method: 'POST', url: '/api/v2/users', payload: aUserRequest({ age: 30, address }), status: 201 }),
  ],
  [
    'PUT /api/v2/users/{id}',
    async () => {
      const u = await createUser(app);
      return {
        method: 'PUT',
        url: `/api/v2/users/${u.id}`,
        payload: { name: 'Put Name', email: u.email, age: 40, address: { ...address, extra: 1 } },
        status: 200,
        check: (b) => expect(b.address).toEqual(address),
      };
    },
  ],
  [
    'PATCH /api/v2/users/{id}',
    async () => {
      const u = await createUser(app);
      return {
        method: 'PATCH',
        url: `/api/v2/users/${u.id}`,
        payload: { age: 44 },
        status: 200,
        check: (b) => expect(b.age).toBe(44),
      };
    },
  ],
  [
    'POST /api/v1/orders',
    async () => {
      const c = await aCustomer(app);
      const p = await createProduct(app, {}, 5);
      return {
        method: 'POST',
        url: '/api/v1/orders',
        payload: { productId: p.id, quantity: 1 },
        status: 201,
        auth: c.auth,
        check: (b) => expect(b.customerId).toBe(c.id),
      };
    },
  ],
  [
    'POST /api/v2/orders',
    async () => {
      const c = await aCustomer(app);
      const p = await createProduct(app, {}, 5);
      return {
        method: 'POST',
        url: '/api/v2/orders',
        payload: { customerId: c.id, items: [{ productId: p.id, quantity: 1, extra: true }] },
        status: 201,
        check: (b) => expect(b.status).toBe('PENDING'),
      };
    },
  ],
  ...(['v1', 'v2'] as const).flatMap((v): Case[] => [
    [
      `PATCH /api/${v}/orders/{id}`,
      async () => ({
        method: 'PATCH',
        url: `/api/${v}/orders/${await anOrderId()}`,
        payload: { note: 'hello' },
        status: 200,
        check: (b) => expect(b.status).toBe('PENDING'),
      }),
    ],
    [
      `POST /api/${v}/orders/{id}/cancellation`,
      async () => ({
        method: 'POST',
        url: `/api/${v}/orders/${await anOrderId()}/cancellation`,
        payload: { reason: 'r' },
        status: 200,
        check: (b) => expect(b.status).toBe('CANCELLED'),
      }),
    ],
    [
      `POST /api/${v}/orders/{id}/confirmation`,
      async () => ({
        method: 'POST',
        url: `/api/${v}/orders/${await anOrderId()}/confirmation`,
        payload: {},
        status: 200,
        check: (b) => expect(b.status).toBe('CONFIRMED'),
      }),
    ],
    [
      `POST /api/${v}/orders/{id}/shipment`,
      async () => ({
        method: 'POST',
        url: `/api/${v}/orders/${await anOrderId('CONFIRMED')}/shipment`,
        payload: {},
        status: 200,
        check: (b) => expect(b.status).toBe('SHIPPED'),
      }),
    ],
    [
      `POST /api/${v}/orders/{id}/delivery`,
      async () => ({
        method: 'POST',
        url: `/api/${v}/orders/${await anOrderId('SHIPPED')}/delivery`,
        payload: {},
        status: 200,
        check: (b) => expect(b.status).toBe('DELIVERED'),
      }),
    ],
  ]),
  [
    'POST /api/products',
    async () => ({
      method: 'POST',
      url: '/api/products',
      payload: aProductRequest(),
      status: 201,
      check: (b) => expect(b.version).toBe(1),
    }),
  ],
  [
    'PUT /api/products/{id}',
    async () => {
      const p = await createProduct(app);
      return {
        method: 'PUT',
        url: `/api/products/${p.id}`,
        payload: { sku: p.sku, name: 'Renamed', price: 1 },
        status: 200,
        check: (b) => expect(b.version).toBe(2),
      };
    },
  ],
  [
    'PUT /api/stock/{productId}',
    async () => {
      const p = await createProduct(app);
      return {
        method: 'PUT',
        url: `/api/stock/${p.id}`,
        payload: { available: 3 },
        status: 200,
        check: (b) => expect(b).toMatchObject({ available: 3, reserved: 0 }),
      };
    },
  ],
];

async function anOrderId(status: 'PENDING' | 'CONFIRMED' | 'SHIPPED' = 'PENDING'): Promise<number> {
  const customer = await aCustomer(app);
  const product = await createProduct(app, {}, 5);
  const id = (await placeOrder(app, customer.auth, product.id, 1)).json().id as number;
  if (status !== 'PENDING') await api({ method: 'POST', url: `/api/v1/orders/${id}/confirmation` });
  if (status === 'SHIPPED') await api({ method: 'POST', url: `/api/v1/orders/${id}/shipment` });
  return id;
}

describe('unknown request members are ignored', () => {
  it.each(cases)('%s', async (_name, make) => {
    const { method, url, payload, status, check, auth } = await make();

    const response = await api({
      method,
      url,
      payload: { ...payload, ...EXTRA },
      ...(auth ? { headers: { authorization: auth } } : {}),
    });

    expect(response.statusCode, response.body).toBe(status);
    if (status !== 204 && status !== 202) {
      const body = response.json();
      expect(body).not.toHaveProperty('unknownMember');
      expect(body).not.toHaveProperty('nested');
      expect(body).not.toHaveProperty('passwordHash');
      if ('id' in body) expect(body.id).not.toBe(424242);
      check?.(body);
    }
  });
});
