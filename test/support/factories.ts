// Test data through the API, with overrides (Goldberg's data factories). Every call is unique.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { ADMIN, bearer } from './tokens.js';

let sequence = 0;
const unique = () => `${process.pid}${Date.now().toString(36)}${(sequence++).toString(36)}`;

export function aUserRequest(overrides: Record<string, unknown> = {}) {
  const n = unique();
  return { name: `User ${n}`, email: `user.${n}@example.com`, password: 'correct horse battery', ...overrides };
}

export interface CreatedUser {
  id: number;
  name: string;
  email: string;
  createdAt: string;
}

export async function createUser(app: FastifyInstance, overrides: Record<string, unknown> = {}): Promise<CreatedUser> {
  const response = await app.inject({
    method: 'POST',
    url: '/api/v1/users',
    payload: aUserRequest(overrides),
    headers: { authorization: ADMIN },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<CreatedUser>();
}

/** app.inject as the administrator, unless the call sets its own Authorization. */
export function asAdmin(app: FastifyInstance): (options: InjectOptions) => Promise<LightMyRequestResponse> {
  return (options) => app.inject({ ...options, headers: { authorization: ADMIN, ...options.headers } });
}

export function aProductRequest(overrides: Record<string, unknown> = {}) {
  const n = unique();
  return { sku: `SKU-${n}`, name: `Product ${n}`, description: 'A fine product', price: 19.99, ...overrides };
}

export interface CreatedProduct {
  id: number;
  sku: string;
  name: string;
  description: string | null;
  price: number;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** A product with `available` units in stock. */
export async function createProduct(
  app: FastifyInstance,
  overrides: Record<string, unknown> = {},
  available = 0,
): Promise<CreatedProduct> {
  const response = await app.inject({
    method: 'POST',
    url: '/api/products',
    payload: aProductRequest(overrides),
    headers: { authorization: ADMIN },
  });
  expect(response.statusCode, response.body).toBe(201);
  if (available > 0) {
    const stock = await app.inject({
      method: 'PUT',
      url: `/api/stock/${response.json().id}`,
      payload: { available },
      headers: { authorization: ADMIN },
    });
    expect(stock.statusCode, stock.body).toBe(200);
  }
  return response.json<CreatedProduct>();
}

export async function stockOf(
  app: FastifyInstance,
  productId: number,
): Promise<{ available: number; reserved: number }> {
  const response = await app.inject({
    method: 'GET',
    url: `/api/stock/${productId}`,
    headers: { authorization: ADMIN },
  });
  expect(response.statusCode, response.body).toBe(200);
  const { available, reserved } = response.json();
  return { available, reserved };
}

/** A user with a token of its own (no admin): the usual customer. */
export async function aCustomer(
  app: FastifyInstance,
  scope = 'orders:read orders:write users:read',
): Promise<{ id: number; auth: string }> {
  const user = await createUser(app);
  return { id: user.id, auth: await bearer({ sub: String(user.id), scope }) };
}

export async function placeOrder(app: FastifyInstance, auth: string, productId: number, quantity: number) {
  return app.inject({
    method: 'POST',
    url: '/api/v1/orders',
    headers: { authorization: auth },
    payload: { productId, quantity },
  });
}
