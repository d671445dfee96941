// Products and stock (spec 4.3, docs/api-guide.md#products-and-stock): management, typed problems, stock levels.
import { describe, expect, it } from 'vitest';
import { aProductRequest, asAdmin, createProduct, stockOf } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const TYPES = 'http://localhost:8080/api/public/problems';

describe('POST /api/products', () => {
  it('creates a product at version 1 with 201, Location and stock 0/0', async () => {
    const request = aProductRequest({ price: 12.5 });

    const response = await api({
      method: 'POST',
      url: '/api/products',
      payload: request,
      headers: { host: 'shop.test' },
    });

    expect(response.statusCode).toBe(201);
    const product = response.json();
    expect(product).toEqual({
      id: expect.any(Number),
      sku: request.sku,
      name: request.name,
      description: request.description,
      price: 12.5,
      version: 1,
      createdAt: expect.stringMatching(/Z$/),
      updatedAt: expect.stringMatching(/Z$/),
    });
    expect(response.headers.location).toBe(`http://shop.test/api/products/${product.id}`);
    expect(await stockOf(app, product.id)).toEqual({ available: 0, reserved: 0 });
  });

  it('keeps prices exact', async () => {
    const product = await createProduct(app, { price: 0.07 });

    expect((await api({ method: 'GET', url: `/api/products/${product.id}` })).body).toContain('"price":0.07');
  });

  it('takes every price of two decimal places up to the maximum, and refuses a third place at any size', async () => {
    // Dividing by 0.01 in binary floating point failed 1234567.89, 111848.18 and 9999999999.99.
    for (const price of [0.07, 1.13, 111848.18, 1234567.89, 9999999999.99]) {
      const product = await createProduct(app, { price });
      expect((await api({ method: 'GET', url: `/api/products/${product.id}` })).body).toContain(`"price":${price},`);
    }
    for (const price of [0.005, 1.001, 1234567.891, 0.010001]) {
      const response = await api({ method: 'POST', url: '/api/products', payload: aProductRequest({ price }) });
      expect(response.json().fieldErrors, String(price)).toEqual([
        { field: 'price', message: 'must have at most 2 decimal places' },
      ]);
    }
  });

  it('answers validation failures in the typed form with fieldErrors', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/products',
      payload: { sku: '', name: 'x', price: 1.234, description: 'd'.repeat(2001) },
    });

    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      type: `${TYPES}/validation-failed`,
      title: 'Validation Failed',
      status: 400,
      detail: 'Validation failed',
      instance: '/api/products',
      fieldErrors: [
        { field: 'description', message: 'size must be between 0 and 2000' },
        { field: 'name', message: 'size must be between 2 and 200' },
        { field: 'price', message: 'must have at most 2 decimal places' },
        { field: 'sku', message: 'must not be blank' },
      ],
    });
  });

  it('rejects a negative or missing price', async () => {
    const negative = await api({ method: 'POST', url: '/api/products', payload: aProductRequest({ price: -1 }) });
    const missing = await api({ method: 'POST', url: '/api/products', payload: { sku: 'X-1', name: 'No price' } });

    expect(negative.json().fieldErrors).toEqual([{ field: 'price', message: 'must be greater than or equal to 0' }]);
    expect(missing.json().fieldErrors).toEqual([{ field: 'price', message: 'must not be null' }]);
  });

  it('answers a duplicate SKU with a typed 409 naming sku', async () => {
    const product = await createProduct(app);

    const response = await api({
      method: 'POST',
      url: '/api/products',
      payload: aProductRequest({ sku: product.sku }),
    });

    expect(response.statusCode).toBe(409);
    expect(response.json()).toEqual({
      type: `${TYPES}/conflict`,
      title: 'Conflict',
      status: 409,
      detail: 'A product with this SKU already exists.',
      instance: '/api/products',
      conflictingField: 'sku',
    });
  });
});

describe('GET /api/products', () => {
  it('pages products with the envelope, X-Total-Count and Link', async () => {
    await createProduct(app);
    await createProduct(app);

    const response = await api({ method: 'GET', url: '/api/products?size=1' });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ size: 1, number: 0, first: true });
    expect(response.json().content).toHaveLength(1);
    expect(Number(response.headers['x-total-count'])).toBeGreaterThanOrEqual(2);
    expect(response.headers.link).toContain('rel="next"');
  });
});

describe('GET /api/products/{id}', () => {
  it('answers a missing product with the typed entity-not-found', async () => {
    const response = await api({ method: 'GET', url: '/api/products/987654321' });

    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({
      type: `${TYPES}/entity-not-found`,
      title: 'Entity Not Found',
      status: 404,
      detail: 'Product 987654321 not found',
      instance: '/api/products/987654321',
    });
    expect(response.headers.etag).toBeUndefined();
  });

  it('answers a bad id in the typed validation form', async () => {
    const response = await api({ method: 'GET', url: '/api/products/abc' });

    expect(response.json()).toMatchObject({
      title: 'Validation Failed',
      fieldErrors: [{ field: 'id', message: 'must be an integer' }],
    });
  });
});

describe('PUT and DELETE /api/products/{id}', () => {
  it('replaces the product and increments its version', async () => {
    const product = await createProduct(app);

    const response = await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      payload: { sku: product.sku, name: 'Renamed', price: 5 },
    });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ id: product.id, name: 'Renamed', price: 5, description: null, version: 2 });
    expect(response.headers.etag).toBe('"2"');
  });

  it('deletes idempotently with 204', async () => {
    const product = await createProduct(app);

    const first = await api({ method: 'DELETE', url: `/api/products/${product.id}` });
    const second = await api({ method: 'DELETE', url: `/api/products/${product.id}` });

    expect([first.statusCode, second.statusCode]).toEqual([204, 204]);
    expect((await api({ method: 'GET', url: `/api/products/${product.id}` })).statusCode).toBe(404);
    expect((await api({ method: 'GET', url: `/api/stock/${product.id}` })).statusCode).toBe(404);
  });

  it('deletes only at the version If-Match names (412 with the current ETag otherwise); gone already is 204', async () => {
    const product = await createProduct(app);
    await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      payload: { sku: product.sku, name: 'Renamed', price: 5 },
    });
    const del = (ifMatch: string) =>
      api({ method: 'DELETE', url: `/api/products/${product.id}`, headers: { 'if-match': ifMatch } });

    const stale = await del('"1"');
    const weak = await del('W/"2"');
    const stillThere = await api({ method: 'GET', url: `/api/products/${product.id}` });
    const current = await del('"1", "2"');
    const again = await del('"2"');

    expect([stale.statusCode, weak.statusCode]).toEqual([412, 412]);
    expect(stale.json()).toMatchObject({
      type: 'about:blank',
      title: 'Precondition Failed',
      status: 412,
      detail: `Product ${product.id} is at version 2, which If-Match does not name.`,
    });
    expect(stale.headers.etag).toBe('"2"');
    expect(stillThere.statusCode).toBe(200);
    expect(current.statusCode).toBe(204);
    expect(again.statusCode).toBe(204);
    expect((await api({ method: 'GET', url: `/api/products/${product.id}` })).statusCode).toBe(404);
  });

  it('needs products:write to change and products:read to read', async () => {
    const product = await createProduct(app);
    const reader = await bearer({ sub: '5', scope: 'products:read' });

    const read = await app.inject({
      method: 'GET',
      url: `/api/products/${product.id}`,
      headers: { authorization: reader },
    });
    const write = await app.inject({
      method: 'DELETE',
      url: `/api/products/${product.id}`,
      headers: { authorization: reader },
    });
    const stockWrite = await app.inject({
      method: 'PUT',
      url: `/api/stock/${product.id}`,
      headers: { authorization: reader },
      payload: { available: 1 },
    });

    expect(read.statusCode).toBe(200);
    expect(write.statusCode).toBe(403);
    expect(write.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="products:write"');
    expect(stockWrite.statusCode).toBe(403);
  });
});

describe('/api/stock/{productId}', () => {
  it('reads with Cache-Control: no-cache', async () => {
    const product = await createProduct(app, {}, 10);

    const response = await api({ method: 'GET', url: `/api/stock/${product.id}` });

    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('no-cache');
    expect(response.json()).toEqual({
      productId: product.id,
      available: 10,
      reserved: 0,
      updatedAt: expect.stringMatching(/Z$/),
    });
  });

  it('sets available with PUT', async () => {
    const product = await createProduct(app);

    const response = await api({
      method: 'PUT',
      url: `/api/stock/${product.id}`,
      payload: { available: 42, reserved: 99 },
    });

    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ productId: product.id, available: 42, reserved: 0 });
  });

  it('validates in the typed form and answers 404 for an unknown product', async () => {
    const product = await createProduct(app);

    const negative = await api({ method: 'PUT', url: `/api/stock/${product.id}`, payload: { available: -1 } });
    const missing = await api({ method: 'PUT', url: '/api/stock/987654321', payload: { available: 1 } });
    const read = await api({ method: 'GET', url: '/api/stock/987654321' });

    expect(negative.json()).toMatchObject({
      status: 400,
      title: 'Validation Failed',
      fieldErrors: [{ field: 'available', message: 'must be greater than or equal to 0' }],
    });
    expect(missing.statusCode).toBe(404);
    expect(read.json()).toMatchObject({ title: 'Entity Not Found', detail: 'Product 987654321 not found' });
  });
});
