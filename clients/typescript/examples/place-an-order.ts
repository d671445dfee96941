// A whole order with the typed client, on a fresh database, with the development token:
//
//   npm start                                     # terminal 1
//   TOKEN=$(npm run -s token) npx tsx clients/typescript/examples/place-an-order.ts
//
// It creates a product with stock and a customer, places an order for the customer (retried
// safely with an Idempotency-Key), confirms it with If-Match, shows what a stale If-Match gets,
// and prints each step. BASE_URL defaults to http://localhost:8080.
import { ProblemError, createResourceApi, unwrap, withRetries } from '@resource-api/client';

const token = process.env.TOKEN;
if (token === undefined || token === '') throw new Error('set TOKEN: TOKEN=$(npm run -s token)');
const api = createResourceApi({ baseUrl: process.env.BASE_URL ?? 'http://localhost:8080', token });
const stamp = Date.now().toString(36);

const product = await unwrap(
  api.client.POST('/api/products', { body: { sku: `EXAMPLE-${stamp}`, name: 'Example mug', price: 12.5 } }),
);
await unwrap(
  api.client.PUT('/api/stock/{productId}', {
    params: { path: { productId: product.data.id } },
    body: { available: 10 },
  }),
);
console.log(`product ${product.data.id}: ${product.data.name} at ${product.data.price}, 10 in stock`);

const customer = await unwrap(
  api.client.POST('/api/v1/users', {
    body: { name: 'Example Customer', email: `customer-${stamp}@example.com`, password: 'correct horse battery' },
  }),
);
console.log(`customer ${customer.data.id}: ${customer.data.email}`);

// A POST that is safe to send again: after a network failure withRetries sends it once more with
// the same Idempotency-Key, and the service answers with the first order instead of a second.
const placed = await withRetries((key) =>
  api.client.POST('/api/v2/orders', {
    params: { header: { 'Idempotency-Key': key } },
    body: { customerId: customer.data.id, items: [{ productId: product.data.id, quantity: 3 }] },
  }),
);
const version = placed.etag ?? '*'; // every order answer carries its ETag
console.log(`order ${placed.data.id}: ${placed.data.status}, total ${placed.data.total}, etag ${version}`);

const confirmed = await unwrap(
  api.client.POST('/api/v1/orders/{id}/confirmation', {
    params: { path: { id: placed.data.id }, header: { 'If-Match': version } },
  }),
);
console.log(`order ${confirmed.data.id}: ${confirmed.data.status}, etag ${confirmed.etag}`);

try {
  // The version read before the confirmation is stale now: nothing is overwritten.
  await unwrap(
    api.client.POST('/api/v1/orders/{id}/cancellation', {
      params: { path: { id: placed.data.id }, header: { 'If-Match': version } },
      body: { reason: 'changed my mind' },
    }),
  );
} catch (error) {
  if (!(error instanceof ProblemError)) throw error;
  console.log(`a stale If-Match: ${error.status} ${error.problem.title}`);
}
