// spec 4.3 and docs/api-guide.md#products-and-stock: Cache-Control, ETag from version, If-None-Match (weak, lists, *)
// answered 304, If-Match answered 412 when stale.
import { describe, expect, it } from 'vitest';
import { asAdmin, createProduct } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

describe('GET /api/products/{id} caching', () => {
  it('sends Cache-Control max-age=3600 and ETag "<version>"', async () => {
    const product = await createProduct(app);

    const response = await api({ method: 'GET', url: `/api/products/${product.id}` });

    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('max-age=3600');
    expect(response.headers.etag).toBe('"1"');
  });

  it.each(['"1"', 'W/"1"', '"7", "1"', '*'])(
    'answers If-None-Match: %s with 304, ETag, Cache-Control and no body',
    async (ifNoneMatch) => {
      const product = await createProduct(app);

      const response = await api({
        method: 'GET',
        url: `/api/products/${product.id}`,
        headers: { 'if-none-match': ifNoneMatch },
      });

      expect(response.statusCode).toBe(304);
      expect(response.body).toBe('');
      expect(response.headers.etag).toBe('"1"');
      expect(response.headers['cache-control']).toBe('max-age=3600');
    },
  );

  it('answers 200 with the new ETag once the product changed', async () => {
    const product = await createProduct(app);
    await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      payload: { sku: product.sku, name: 'Changed', price: 1 },
    });

    const response = await api({
      method: 'GET',
      url: `/api/products/${product.id}`,
      headers: { 'if-none-match': '"1"' },
    });

    expect(response.statusCode).toBe(200);
    expect(response.headers.etag).toBe('"2"');
    expect(response.json().name).toBe('Changed');
  });

  it('never answers 304 for a missing product or a write', async () => {
    const product = await createProduct(app);

    const missing = await api({ method: 'GET', url: '/api/products/987654321', headers: { 'if-none-match': '*' } });
    const put = await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      headers: { 'if-none-match': '*' },
      payload: { sku: product.sku, name: 'Again', price: 1 },
    });

    expect(missing.statusCode).toBe(404);
    expect(put.statusCode).toBe(200);
  });
});

describe('PUT /api/products/{id} with If-Match', () => {
  it('replaces when If-Match names the current version', async () => {
    const product = await createProduct(app);

    const response = await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      headers: { 'if-match': '"1"' },
      payload: { sku: product.sku, name: 'Matched', price: 2 },
    });

    expect(response.statusCode).toBe(200);
    expect(response.json().version).toBe(2);
  });

  it('answers a stale version with 412 and changes nothing', async () => {
    const product = await createProduct(app);
    await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      payload: { sku: product.sku, name: 'First', price: 2 },
    });

    const response = await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      headers: { 'if-match': '"1"' },
      payload: { sku: product.sku, name: 'Lost update', price: 3 },
    });

    expect(response.statusCode).toBe(412);
    expect(response.headers.etag).toBe('"2"');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Precondition Failed',
      status: 412,
      detail: `Product ${product.id} is at version 2, which If-Match does not name.`,
      instance: `/api/products/${product.id}`,
    });
    expect((await api({ method: 'GET', url: `/api/products/${product.id}` })).json().name).toBe('First');
  });

  it('lets exactly one of two concurrent writers with the same If-Match win', async () => {
    const product = await createProduct(app);
    const write = (name: string) =>
      api({
        method: 'PUT',
        url: `/api/products/${product.id}`,
        headers: { 'if-match': '"1"' },
        payload: { sku: product.sku, name, price: 2 },
      });

    const results = await Promise.all([write('Writer A'), write('Writer B')]);

    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 412]);
  });

  it('accepts If-Match: * for an existing product and answers 404 for a missing one', async () => {
    const product = await createProduct(app);

    const star = await api({
      method: 'PUT',
      url: `/api/products/${product.id}`,
      headers: { 'if-match': '*' },
      payload: { sku: product.sku, name: 'Star', price: 2 },
    });
    const missing = await api({
      method: 'PUT',
      url: '/api/products/987654321',
      headers: { 'if-match': '"1"' },
      payload: { sku: 'nope', name: 'Nope', price: 2 },
    });

    expect(star.statusCode).toBe(200);
    expect(missing.statusCode).toBe(404);
  });
});
