// /api/v1/webhook-subscriptions (docs/webhooks.md): administrators manage
// subscriptions; the secret is shown at creation and rotation only; URLs that could reach a
// private network are refused (SSRF). Host names are resolved by a stand-in that answers from a
// table: no test here asks a DNS server or sends a packet anywhere.
import { sql } from 'kysely';
import { subscriptionBinding } from '../../src/crypto/encryption.js';
import { describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../src/webhooks/address-guard.js';
import { asAdmin } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { ALL_SCOPES, bearer } from '../support/tokens.js';

const HOSTS: Record<string, string[]> = {
  'hooks.example.com': ['93.184.215.14'],
  'v6.example.com': ['2606:4700::1111'],
  localhost: ['127.0.0.1', '::1'],
  'internal.example.com': ['10.0.0.5'],
  'metadata.example.com': ['169.254.169.254'],
  'mixed.example.com': ['93.184.215.14', '::ffff:127.0.0.1'],
};
const resolveHost = (host: string) =>
  HOSTS[host] === undefined ? Promise.reject(new Error(`ENOTFOUND ${host}`)) : Promise.resolve(HOSTS[host]);

const { app } = await buildTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' }, { resolveHost });
const api = asAdmin(app);
const BASE = '/api/v1/webhook-subscriptions';
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

async function create(body: Record<string, unknown>) {
  return api({ method: 'POST', url: BASE, payload: body });
}

describe('managing subscriptions', () => {
  it('creates one (201, Location, the secret once), reads it without the secret, lists it', async () => {
    const created = await create({ url: 'https://hooks.example.com/a', events: ['order.*', 'user.deleted'] });
    expect(created.statusCode, created.body).toBe(201);
    const body = created.json<Record<string, unknown>>();
    expect(body).toMatchObject({
      url: 'https://hooks.example.com/a',
      events: ['order.*', 'user.deleted'],
      description: null,
      enabled: true,
    });
    expect(body.secret).toMatch(SECRET);
    expect(Buffer.from(String(body.secret).slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(created.headers.location).toBe(`http://localhost${BASE}/${String(body.id)}`);
    expect(created.headers['cache-control']).toBe('no-store');

    const one = await api({ method: 'GET', url: `${BASE}/${String(body.id)}` });
    expect(one.statusCode).toBe(200);
    expect(one.json()).not.toHaveProperty('secret');
    expect(one.json()).toEqual({ ...body, secret: undefined });

    await create({ url: 'https://v6.example.com/b', events: ['*'], description: 'all of it' });
    const list = await api({ method: 'GET', url: `${BASE}?size=1` });
    expect(list.statusCode).toBe(200);
    const page = list.json<{ content: Record<string, unknown>[]; totalElements: number }>();
    expect(page.content).toHaveLength(1);
    expect(page.content[0]).toMatchObject({ url: 'https://v6.example.com/b', description: 'all of it' }); // newest first
    expect(page.content[0]).not.toHaveProperty('secret');
    expect(list.headers['x-total-count']).toBe(String(page.totalElements));
  });

  it('changes URL, events, description and enabled by PATCH, and deletes idempotently', async () => {
    const id = (await create({ url: 'https://hooks.example.com/c', events: ['user.*'], description: 'x' })).json<{
      id: number;
    }>().id;
    const patched = await api({
      method: 'PATCH',
      url: `${BASE}/${id}`,
      payload: { enabled: false, events: ['order.shipped'], description: null, url: 'https://hooks.example.com/d' },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({
      id,
      url: 'https://hooks.example.com/d',
      events: ['order.shipped'],
      description: null,
      enabled: false,
    });
    const refused = await api({ method: 'PATCH', url: `${BASE}/${id}`, payload: { url: 'https://10.1.1.1/x' } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ fieldErrors: [{ field: 'url' }] });

    expect((await api({ method: 'DELETE', url: `${BASE}/${id}` })).statusCode).toBe(204);
    expect((await api({ method: 'DELETE', url: `${BASE}/${id}` })).statusCode).toBe(204);
    const gone = await api({ method: 'GET', url: `${BASE}/${id}` });
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toMatchObject({ title: 'Entity Not Found', detail: `Webhook subscription ${id} not found` });
    expect((await api({ method: 'PATCH', url: `${BASE}/${id}`, payload: { enabled: true } })).statusCode).toBe(404);
    expect((await api({ method: 'POST', url: `${BASE}/${id}/secret-rotation` })).statusCode).toBe(404);
  });

  it('deletes its queued deliveries with a subscription (migration 0013: a trigger, not a foreign key)', async () => {
    const id = (await create({ url: 'https://hooks.example.com/queued', events: ['user.*'] })).json<{ id: number }>()
      .id;
    const user = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: 'Queued', email: `queued.${Date.now()}@example.com`, password: 'correct horse battery' },
    });
    expect(user.statusCode).toBe(201);
    const queued = async () =>
      Number(
        (
          await sql<{
            n: number;
          }>`select count(*)::int as n from webhook_deliveries where subscription_id = ${id}`.execute(app.db)
        ).rows[0]?.n,
      );
    expect(await queued()).toBe(1);
    expect((await api({ method: 'DELETE', url: `${BASE}/${id}` })).statusCode).toBe(204);
    expect(await queued()).toBe(0);
  });

  it('rotates the secret: a new one is shown, the old one keeps signing for WEBHOOK_SECRET_OVERLAP_HOURS', async () => {
    const first = (await create({ url: 'https://hooks.example.com/e', events: ['*'] })).json<{
      id: number;
      secret: string;
    }>();
    const rotated = await api({ method: 'POST', url: `${BASE}/${first.id}/secret-rotation` });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const second = rotated.json<{ secret: string }>().secret;
    expect(second).toMatch(SECRET);
    expect(second).not.toBe(first.secret);
    const { rows } = await sql<{ secret: string; previous_secret: string; hours: number | string }>`
      select secret, previous_secret,
             extract(epoch from previous_secret_expires_at - now()) / 3600 as hours
        from webhook_subscriptions where id = ${first.id}`.execute(app.db);
    // Stored encrypted (docs/webhooks.md, "Secrets at rest"): the new one current, the old one kept.
    expect(app.encryption.decrypt(rows[0]!.secret, 'webhook-secret', subscriptionBinding(first.id))).toBe(second);
    expect(app.encryption.decrypt(rows[0]!.previous_secret, 'webhook-secret', subscriptionBinding(first.id))).toBe(
      first.secret,
    );
    expect(Number(rows[0]!.hours)).toBeGreaterThan(23.9);
    expect(Number(rows[0]!.hours)).toBeLessThanOrEqual(24);
  });
});

describe('who may', () => {
  it('needs admin besides the webhooks scopes (403), and each route its scope', async () => {
    const notAdmin = await bearer({ sub: '5', scope: ALL_SCOPES });
    for (const [method, url] of [
      ['GET', BASE],
      ['POST', BASE],
    ] as const) {
      const response = await app.inject({
        method,
        url,
        headers: { authorization: notAdmin },
        ...(method === 'POST' ? { payload: { url: 'https://hooks.example.com/f', events: ['*'] } } : {}),
      });
      expect(response.statusCode, `${method} ${url}`).toBe(403);
      expect(response.headers['www-authenticate']).toContain('scope="admin"');
    }
    const noWrite = await bearer({ sub: '5', scope: 'admin webhooks:read' });
    const post = await app.inject({
      method: 'POST',
      url: BASE,
      headers: { authorization: noWrite },
      payload: { url: 'https://hooks.example.com/f', events: ['*'] },
    });
    expect(post.statusCode).toBe(403);
    expect(post.headers['www-authenticate']).toContain('scope="webhooks:write"');
    expect((await app.inject({ method: 'GET', url: BASE })).statusCode).toBe(401);
  });
});

describe('bad bodies and unsafe URLs', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['no url', { events: ['*'] }, 'url'],
    ['no events', { url: 'https://hooks.example.com/g' }, 'events'],
    ['empty events', { url: 'https://hooks.example.com/g', events: [] }, 'events'],
    ['a repeated event type', { url: 'https://hooks.example.com/g', events: ['*', '*'] }, 'events'],
    ['an unknown event type', { url: 'https://hooks.example.com/g', events: ['order.exploded'] }, 'events[0]'],
    ['not a URL', { url: 'hooks', events: ['*'] }, 'url'],
    ['ftp:', { url: 'ftp://hooks.example.com/g', events: ['*'] }, 'url'],
    ['http: (private networks off)', { url: 'http://hooks.example.com/g', events: ['*'] }, 'url'],
    ['credentials', { url: 'https://user:pw@hooks.example.com/g', events: ['*'] }, 'url'],
    ['IPv4 loopback', { url: 'https://127.0.0.1/g', events: ['*'] }, 'url'],
    ['IPv6 loopback', { url: 'https://[::1]/g', events: ['*'] }, 'url'],
    ['IPv4-mapped IPv6 loopback', { url: 'https://[::ffff:127.0.0.1]/g', events: ['*'] }, 'url'],
    ['IPv4-mapped IPv6, hex form', { url: 'https://[::ffff:7f00:1]/g', events: ['*'] }, 'url'],
    ['cloud metadata', { url: 'https://169.254.169.254/latest/meta-data', events: ['*'] }, 'url'],
    ['private IPv4', { url: 'https://192.168.1.10/g', events: ['*'] }, 'url'],
    ['unique-local IPv6', { url: 'https://[fd12:3456::1]/g', events: ['*'] }, 'url'],
    ['unspecified', { url: 'https://0.0.0.0/g', events: ['*'] }, 'url'],
    ['decimal IPv4 (2130706433)', { url: 'https://2130706433/g', events: ['*'] }, 'url'],
    ['localhost', { url: 'https://localhost/g', events: ['*'] }, 'url'],
    ['a name that resolves to a private address', { url: 'https://internal.example.com/g', events: ['*'] }, 'url'],
    ['a name that resolves to the metadata address', { url: 'https://metadata.example.com/', events: ['*'] }, 'url'],
    ['a name with one public and one loopback address', { url: 'https://mixed.example.com/g', events: ['*'] }, 'url'],
    ['a name that does not resolve', { url: 'https://nowhere.example.com/g', events: ['*'] }, 'url'],
  ];
  it.each(cases.map(([name, body, field]) => [name, field, body] as const))(
    '%s → 400 naming %s',
    async (_name, field, body) => {
      const response = await create(body);
      expect(response.statusCode, response.body).toBe(400);
      const problem = response.json<{ title: string; fieldErrors: { field: string; message: string }[] }>();
      expect(problem.title).toBe('Validation Failed');
      expect(problem.fieldErrors.map((f) => f.field)).toContain(field);
      // The address a name resolved to is never told (it would map the internal network).
      expect(response.body).not.toMatch(/10\.0\.0\.5|169\.254\.169\.254|127\.0\.0\.1/);
    },
  );

  it('classifies addresses with ipaddr.js: only public unicast passes', () => {
    for (const a of ['93.184.215.14', '2606:4700::1111', '8.8.8.8']) expect(isPublicAddress(a), a).toBe(true);
    for (const a of [
      '127.0.0.1',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '10.0.0.1',
      '172.16.0.1',
      '192.168.0.1',
      '169.254.169.254',
      'fe80::1',
      'fd00::1',
      '0.0.0.0',
      '::',
      '100.64.0.1',
      '64:ff9b::7f00:1',
      '2002:7f00:1::',
      'not an address',
    ])
      expect(isPublicAddress(a), a).toBe(false);
  });
});

describe('with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true (development)', async () => {
  const dev = await buildTestApp({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { resolveHost });
  it('accepts http: and loopback URLs, still refusing other schemes', async () => {
    const devApi = asAdmin(dev.app);
    const ok = await devApi({ method: 'POST', url: BASE, payload: { url: 'http://127.0.0.1:9/hook', events: ['*'] } });
    expect(ok.statusCode, ok.body).toBe(201);
    const ftp = await devApi({ method: 'POST', url: BASE, payload: { url: 'ftp://127.0.0.1/hook', events: ['*'] } });
    expect(ftp.statusCode).toBe(400);
  });
});
