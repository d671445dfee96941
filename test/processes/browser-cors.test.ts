// spec 4.4 in a real browser: Debian's Chromium, driven by playwright-core, runs fetch() from
// a page on a second origin against the API, in cors mode with credentials and a bearer
// token. Host names map to 127.0.0.1 through Chromium's resolver rules, so the page origin
// (http://app.test:<port>) and the API (http://api.test:<port>) are different sites.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, engine } from '../support/test-app.js';
import { chromiumAvailable, launchChromium } from '../support/chromium.js';
import { ADMIN } from '../support/tokens.js';

const available = chromiumAvailable('test/processes/browser-cors.test.ts');

interface FetchResult {
  ok: boolean;
  status?: number;
  totalCount?: string | null;
  location?: string | null;
  body?: unknown;
  error?: string;
}

describe.runIf(engine === 'pglite' && available)('CORS in Chromium', () => {
  // Undefined until beforeAll gets that far: afterAll must not fail on what never started.
  let browser: Browser | undefined;
  let pages: Server | undefined;
  let apiBase: string;
  let pageBase: string;

  beforeAll(async () => {
    const server = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>client</title><p>client app</p>'),
    );
    pages = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const pagePort = (server.address() as AddressInfo).port;
    pageBase = `http://app.test:${pagePort}`;

    const { app } = await buildTestApp({ CORS_ALLOWED_ORIGINS: pageBase });
    await app.listen({ port: 0, host: '127.0.0.1' });
    apiBase = `http://api.test:${(app.server.address() as AddressInfo).port}`;

    browser = await launchChromium([
      '--host-resolver-rules=MAP app.test 127.0.0.1, MAP evil.test 127.0.0.1, MAP api.test 127.0.0.1',
    ]);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => pages?.close(() => resolve()));
  });

  async function openPage(origin: string): Promise<Page> {
    const page = await browser!.newPage();
    await page.goto(`${origin}/`);
    return page;
  }

  function call(
    page: Page,
    path: string,
    init: { method?: string; body?: unknown; auth?: boolean } = {},
  ): Promise<FetchResult> {
    return page.evaluate(
      async ({ url, method, body, authorization }) => {
        try {
          const headers: Record<string, string> = {};
          if (authorization) headers.Authorization = authorization;
          if (body !== undefined) headers['Content-Type'] = 'application/json';
          const response = await fetch(url, {
            method,
            mode: 'cors',
            credentials: 'include',
            headers,
            body: body === undefined ? undefined : JSON.stringify(body),
          });
          const text = await response.text();
          return {
            ok: true,
            status: response.status,
            totalCount: response.headers.get('X-Total-Count'),
            location: response.headers.get('Location'),
            body: text ? JSON.parse(text) : undefined,
          };
        } catch (error) {
          return { ok: false, error: String(error) };
        }
      },
      {
        url: `${apiBase}${path}`,
        method: init.method ?? 'GET',
        body: init.body,
        authorization: init.auth === false ? undefined : ADMIN,
      },
    );
  }

  it('lets the allowed origin list, create, replace and read errors, with exposed headers readable', async () => {
    const page = await openPage(pageBase);
    const email = `browser.${Date.now()}@example.com`;

    const created = await call(page, '/api/v1/users', {
      method: 'POST',
      body: { name: 'Browser User', email, password: 'browser-password' },
    });
    const list = await call(page, '/api/v1/users?size=1');
    const id = (created.body as { id: number }).id;
    const replaced = await call(page, `/api/v1/users/${id}`, {
      method: 'PUT',
      body: { name: 'Browser Renamed', email },
    });
    const missing = await call(page, '/api/v1/users/987654321');
    const anonymous = await call(page, '/api/v1/users?size=1', { auth: false });

    expect(created).toMatchObject({ ok: true, status: 201, location: `${apiBase}/api/v1/users/${id}` });
    expect(list.ok).toBe(true);
    expect(list.status).toBe(200);
    expect(Number(list.totalCount)).toBeGreaterThanOrEqual(1);
    expect(replaced).toMatchObject({ ok: true, status: 200, body: { id, name: 'Browser Renamed', email } });
    expect(missing).toMatchObject({ ok: true, status: 404, body: { title: 'Entity Not Found', status: 404 } });
    expect(anonymous).toMatchObject({ ok: true, status: 401, body: { title: 'Unauthorized', status: 401 } });
    await page.close();
  });

  it('blocks every call from an origin that is not allowed', async () => {
    const evil = await openPage(pageBase.replace('app.test', 'evil.test'));

    const results = await Promise.all([
      call(evil, '/api/v1/users?size=1'),
      call(evil, '/api/v1/users', {
        method: 'POST',
        body: { name: 'Evil User', email: 'evil@example.com', password: 'evil-password' },
      }),
      call(evil, '/api/v1/users/1', { method: 'PUT', body: { name: 'Evil', email: 'evil@example.com' } }),
      call(evil, '/api/v1/users/987654321'),
      call(evil, '/api/v1/users?size=1', { auth: false }),
    ]);

    for (const result of results) {
      expect(result.ok).toBe(false);
      expect(result.error).toContain('TypeError');
    }
    await evil.close();
  });
});
