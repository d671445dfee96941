// Framework errors as problem documents (spec 7.3 rule 4, docs/api-guide.md#errors) through the real app.
import { describe, expect, it } from 'vitest';
import { aUserRequest, asAdmin } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

describe('framework errors', () => {
  it('answers malformed JSON with 400', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'content-type': 'application/json' },
      payload: '{"name": "x",',
    });

    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toBe('application/problem+json');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Bad Request',
      status: 400,
      detail: 'The request body is not valid JSON.',
      instance: '/api/v1/users',
    });
  });

  it('rejects a prototype-poisoning body', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'content-type': 'application/json' },
      payload: '{"__proto__": {"admin": true}}',
    });

    expect(response.statusCode).toBe(400);
    expect(response.json().title).toBe('Bad Request');
  });

  it('answers a body over 1 MiB with 413, its status line and title both RFC 9110\'s "Content Too Large"', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: aUserRequest({ name: 'x'.repeat(1024 * 1024) }),
    });

    expect(response.statusCode).toBe(413);
    expect(response.statusMessage).toBe('Content Too Large');
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Content Too Large',
      status: 413,
      detail: 'The request body is larger than 1 MiB.',
      instance: '/api/v1/users',
    });
  });

  it('answers a body of another media type with 415', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      headers: { 'content-type': 'text/plain' },
      payload: 'name=x',
    });

    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Unsupported Media Type',
      status: 415,
      detail: 'The request body must be sent as application/json.',
      instance: '/api/v1/users',
    });
  });

  it('answers a body without Content-Type with 415', async () => {
    const response = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: Buffer.from(JSON.stringify(aUserRequest())),
    });

    expect(response.statusCode).toBe(415);
    expect(response.json().title).toBe('Unsupported Media Type');
  });

  it('answers an unknown path with 404', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/nothing-here?x=1' });

    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Not Found',
      status: 404,
      detail: 'No resource exists at /api/v1/nothing-here.',
      instance: '/api/v1/nothing-here',
    });
  });

  it('answers a known path asked with another method with 405 and Allow', async () => {
    const collection = await api({ method: 'PUT', url: '/api/v1/users' });
    const item = await api({ method: 'POST', url: '/api/v1/users/1' });

    expect(collection.statusCode).toBe(405);
    expect(collection.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
    expect(collection.json()).toEqual({
      type: 'about:blank',
      title: 'Method Not Allowed',
      status: 405,
      detail: 'PUT is not allowed on /api/v1/users; allowed: GET, HEAD, POST, OPTIONS.',
      instance: '/api/v1/users',
    });
    expect(item.statusCode).toBe(405);
    expect(item.headers.allow).toBe('GET, HEAD, PUT, PATCH, DELETE, OPTIONS');
  });

  it('answers an Accept the route cannot meet with 406', async () => {
    const response = await api({ method: 'GET', url: '/api/v1/users', headers: { accept: 'text/html' } });

    expect(response.statusCode).toBe(406);
    expect(response.json()).toEqual({
      type: 'about:blank',
      title: 'Not Acceptable',
      status: 406,
      detail: 'This resource is available as application/json, application/vnd.resource-api.v1+json.',
      instance: '/api/v1/users',
    });
  });

  it.each([
    'application/json',
    'application/*',
    '*/*',
    'text/html, application/json;q=0.5',
    'application/json; charset=utf-8',
  ])('accepts Accept: %s', async (accept) => {
    const response = await api({ method: 'GET', url: '/api/v1/users', headers: { accept } });

    expect(response.statusCode).toBe(200);
  });

  it('never answers an error with 200', async () => {
    const responses = await Promise.all([
      api({ method: 'GET', url: '/api/v1/users/0' }),
      api({ method: 'DELETE', url: '/api/v1/users/abc' }),
      api({ method: 'GET', url: '/api/v1/users?size=x' }),
    ]);

    for (const r of responses) {
      expect(r.statusCode).toBe(400);
      expect(r.json().status).toBe(400);
    }
  });
});

describe('request ids and common headers', () => {
  it('echoes a caller X-Request-Id and generates one otherwise', async () => {
    const given = await api({ method: 'GET', url: '/api/public/health/live', headers: { 'x-request-id': 'abc-123' } });
    const generated = await api({ method: 'GET', url: '/api/public/health/live' });

    expect(given.headers['x-request-id']).toBe('abc-123');
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('replaces an X-Request-Id that could forge log lines', async () => {
    const response = await api({
      method: 'GET',
      url: '/api/public/health/live',
      headers: { 'x-request-id': 'a b\tc"{}' },
    });

    expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('sends X-Content-Type-Options: nosniff on successes and errors', async () => {
    const ok = await api({ method: 'GET', url: '/api/public/health/live' });
    const missing = await api({ method: 'GET', url: '/nope' });

    expect(ok.headers['x-content-type-options']).toBe('nosniff');
    expect(missing.headers['x-content-type-options']).toBe('nosniff');
  });
});
