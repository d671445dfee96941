// Test data through the API, with overrides (Goldberg's data factories). Every call is unique.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { ADMIN } from './tokens.js';

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
  const response = await app.inject({ method: 'POST', url: '/api/v1/users', payload: aUserRequest(overrides), headers: { authorization: ADMIN } });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<CreatedUser>();
}

/** app.inject as the administrator, unless the call sets its own Authorization. */
export function asAdmin(app: FastifyInstance): (options: InjectOptions) => Promise<LightMyRequestResponse> {
  return (options) => app.inject({ ...options, headers: { authorization: ADMIN, ...options.headers } });
}
