// The password reset, end to end (docs/api-guide.md "Password reset"): the request mails a
// single-use link through a real SMTP server on 127.0.0.1, the public completion sets the new
// password, and the token never shows anywhere but in the mail.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { aUserRequest, asAdmin, createUser } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';
import { mailCatcher } from '../support/mail-catcher.js';
import { clearOfMinuteBoundary, until } from '../support/until.js';

const mails = await mailCatcher();
const { received } = mails;
afterAll(() => mails.close());

const RESET_URL = 'https://app.example.com/reset?token={token}';
const { app, logs } = await buildTestApp({
  SMTP_URL: mails.url,
  SMTP_FROM: 'Shop <no-reply@shop.example>',
  PASSWORD_RESET_URL: RESET_URL,
  PASSWORD_RESET_TTL_MINUTES: '30',
});
const api = asAdmin(app);

beforeEach(() => {
  received.length = 0;
});

/** Asks for a reset of `userId` as the user itself and returns the token of the mail it got. */
async function requestReset(userId: number, email: string): Promise<string> {
  const before = received.length;
  const response = await app.inject({
    method: 'POST',
    url: `/api/v1/users/${userId}/password-resets`,
    headers: { authorization: await bearer({ sub: String(userId), scope: 'users:write' }) },
  });
  expect(response.statusCode, response.body).toBe(202);
  expect(response.body).toBe('');
  const mail = await until('the reset mail', () =>
    received.slice(before).find((m) => m.to !== undefined && JSON.stringify(m.to).includes(email)),
  );
  const link = /https:\/\/app\.example\.com\/reset\?token=([A-Za-z0-9_%-]+)/.exec(mail.text ?? '');
  expect(link, mail.text).not.toBeNull();
  return decodeURIComponent(link![1]!);
}

function complete(token: unknown, newPassword: unknown = 'a brand new password') {
  return app.inject({
    method: 'POST',
    url: '/api/public/password-resets/completion',
    payload: { token, newPassword },
  });
}

async function changePassword(userId: number, currentPassword: string) {
  return app.inject({
    method: 'POST',
    url: `/api/v1/users/${userId}/password-changes`,
    headers: { authorization: await bearer({ sub: String(userId), scope: 'users:write' }) },
    payload: { currentPassword, newPassword: 'yet another password' },
  });
}

function expectInvalidToken(response: Awaited<ReturnType<typeof complete>>) {
  expect(response.statusCode, response.body).toBe(400);
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(response.json()).toMatchObject({
    type: 'about:blank',
    title: 'Validation Error',
    status: 400,
    errors: [{ field: 'token', message: 'must be a valid, unexpired reset token', rejected: null }],
  });
}

describe('the reset mail', () => {
  it('reaches the user through SMTP with a subject, a text and an HTML part, and the link', async () => {
    const user = await createUser(app, { name: 'Ada Lovelace' });
    const before = received.length;
    await requestReset(user.id, user.email);
    const mail = received[before]!;
    expect(mail.subject).toBe('Reset your password');
    expect(mail.from?.value[0]).toMatchObject({ name: 'Shop', address: 'no-reply@shop.example' });
    expect(mail.to && !Array.isArray(mail.to) ? mail.to.value[0]?.address : undefined).toBe(user.email);
    expect(mail.text).toContain('Hello Ada Lovelace,');
    expect(mail.text).toContain('within 30 minutes');
    expect(mail.html).toMatch(/<a href="https:\/\/app\.example\.com\/reset\?token=[A-Za-z0-9_-]{43}">/);
  });

  it('is asked for by the user itself or an administrator; another user answers 404 and sends nothing', async () => {
    const owner = await createUser(app);
    const other = await createUser(app);
    const asOther = await bearer({ sub: String(other.id), scope: 'users:write' });
    const response = await app.inject({
      method: 'POST',
      url: `/api/v1/users/${owner.id}/password-resets`,
      headers: { authorization: asOther },
    });
    expect(response.statusCode).toBe(404);
    const byAdmin = await api({ method: 'POST', url: `/api/v1/users/${owner.id}/password-resets` });
    expect(byAdmin.statusCode).toBe(202);
    await until('the admin-asked mail', () => received.find((m) => JSON.stringify(m.to).includes(owner.email)));
    expect(received.filter((m) => JSON.stringify(m.to).includes(owner.email))).toHaveLength(1);
  });

  it('is not sent for a user that does not exist (404)', async () => {
    const response = await api({ method: 'POST', url: '/api/v1/users/987654321/password-resets' });
    expect(response.statusCode).toBe(404);
    await new Promise((r) => setTimeout(r, 100));
    expect(received).toHaveLength(0);
  });
});

describe('POST /api/public/password-resets/completion', () => {
  it('sets the new password with no bearer token: the old one stops working, the new one works', async () => {
    const user = await createUser(app, { password: 'the old password' });
    const token = await requestReset(user.id, user.email);
    const done = await complete(token, 'a brand new password');
    expect(done.statusCode, done.body).toBe(204);
    expect(done.body).toBe('');

    expect((await changePassword(user.id, 'the old password')).statusCode).toBe(422);
    expect((await changePassword(user.id, 'a brand new password')).statusCode).toBe(204);
  });

  it('records user.password_changed, with the id only', async () => {
    const user = await createUser(app);
    const token = await requestReset(user.id, user.email);
    const { rows: before } = await sql<{ n: number }>`select count(*)::int as n from events`.execute(app.db);
    expect((await complete(token)).statusCode).toBe(204);
    const { rows } = await sql<{ type: string; subject: string; data: string }>`
      select type, subject, data from events order by sequence desc limit 1`.execute(app.db);
    const { rows: after } = await sql<{ n: number }>`select count(*)::int as n from events`.execute(app.db);
    expect(after[0]!.n).toBe(before[0]!.n + 1);
    expect(rows[0]).toMatchObject({ type: 'user.password_changed', subject: `users/${user.id}` });
    expect(JSON.parse(rows[0]!.data)).toEqual({ id: user.id });
  });

  it('refuses a used token, and changes nothing', async () => {
    const user = await createUser(app);
    const token = await requestReset(user.id, user.email);
    expect((await complete(token, 'first new password')).statusCode).toBe(204);
    expectInvalidToken(await complete(token, 'second new password'));
    expect((await changePassword(user.id, 'first new password')).statusCode).toBe(204);
  });

  it('refuses the older token once a second reset was asked for; the newer one works', async () => {
    const user = await createUser(app);
    const older = await requestReset(user.id, user.email);
    const newer = await requestReset(user.id, user.email);
    expect(newer).not.toBe(older);
    expectInvalidToken(await complete(older));
    expect((await complete(newer)).statusCode).toBe(204);
  });

  it('ends every outstanding reset of the user when one completes', async () => {
    const user = await createUser(app);
    const token = await requestReset(user.id, user.email);
    expect((await complete(token)).statusCode).toBe(204);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from password_resets where user_id = ${user.id}`.execute(app.db);
    expect(rows[0]!.n).toBe(0);
  });

  it("refuses a link mailed before a password change, and leaves other users' links alone", async () => {
    const user = await createUser(app, { password: 'the old password' });
    const other = await createUser(app);
    const mailedBefore = await requestReset(user.id, user.email);
    const othersLink = await requestReset(other.id, other.email);
    expect((await changePassword(user.id, 'the old password')).statusCode).toBe(204);
    expectInvalidToken(await complete(mailedBefore));
    expect((await complete(othersLink)).statusCode).toBe(204);
  });

  it('refuses an expired token', async () => {
    const user = await createUser(app, { password: 'the old password' });
    const token = await requestReset(user.id, user.email);
    await sql`update password_resets set expires_at = now() - interval '1 second' where user_id = ${user.id}`.execute(
      app.db,
    );
    expectInvalidToken(await complete(token));
    expect((await changePassword(user.id, 'the old password')).statusCode).toBe(204);
  });

  it('refuses an unknown token', async () => {
    expectInvalidToken(await complete('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'));
  });

  it('applies the password rules of a password change (400 in the user form); the token still works after', async () => {
    const user = await createUser(app);
    const token = await requestReset(user.id, user.email);
    const weak = await complete(token, 'short');
    expect(weak.statusCode).toBe(400);
    expect(weak.json()).toMatchObject({
      title: 'Validation Error',
      errors: [{ field: 'newPassword', message: 'size must be between 8 and 72', rejected: null }],
    });
    const blank = await complete('', 'a good long password');
    expect(blank.statusCode).toBe(400);
    expect(blank.json().errors).toEqual([{ field: 'token', message: 'must not be blank', rejected: null }]);
    expect((await complete(token, 'a good long password')).statusCode).toBe(204);
  });

  it('never shows the token in a response, a log line, an event or the database', async () => {
    const user = await createUser(app);
    const token = await requestReset(user.id, user.email);
    const { rows } = await sql<{ token_hash: string }>`
      select token_hash from password_resets where user_id = ${user.id}`.execute(app.db);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).not.toContain(token);
    const done = await complete(token);
    expect(done.statusCode).toBe(204);
    expectInvalidToken(await complete(token));
    const { rows: events } = await sql<{ data: string }>`select data from events`.execute(app.db);
    expect(events.some((e) => e.data.includes(token))).toBe(false);
    expect(logs.some((line) => JSON.stringify(line).includes(token))).toBe(false);
  });
});

describe('a mail server that is down', () => {
  it('still answers 202 at once, and logs a warn line without the token or the link', async () => {
    // A server that takes the connection and never says a word (a hung one): a reset that waited
    // for its mail would wait for the mailer's time-out. (A refused port would fail at once.)
    const hung = new Set<Socket>();
    const silent: Server = createServer((socket) => {
      hung.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const deadPort = (silent.address() as { port: number }).port;
    onTestFinished(async () => {
      for (const socket of hung) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });

    const { app: down, logs: downLogs } = await buildTestApp(
      { SMTP_URL: `smtp://127.0.0.1:${deadPort}`, PASSWORD_RESET_URL: RESET_URL },
      // A send that waited for the mail would take three time-outs (3 s): the answer must not.
      { mail: { retryDelaysMs: [50, 50], timeoutMs: 1000 } },
    );
    const created = await down.inject({
      method: 'POST',
      url: '/api/v1/users',
      headers: { authorization: (await import('../support/tokens.js')).ADMIN },
      payload: aUserRequest(),
    });
    const user = created.json<{ id: number }>();
    const started = performance.now();
    const response = await down.inject({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-resets`,
      headers: { authorization: await bearer({ sub: String(user.id), scope: 'users:write' }) },
    });
    expect(response.statusCode).toBe(202);
    expect(performance.now() - started).toBeLessThan(1500);

    const gaveUp = await until(
      'the last warn line',
      () => downLogs.find((l) => typeof l.msg === 'string' && l.msg.includes('giving up')),
      10_000,
    );
    expect(gaveUp.level).toBe(40);
    const attempts = downLogs.filter(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('password reset mail not sent'),
    );
    expect(attempts).toHaveLength(3); // the first attempt and two retries
    expect(downLogs.some((l) => JSON.stringify(l).includes('app.example.com'))).toBe(false);
  });
});

describe('without SMTP_URL', () => {
  it('development keeps the whole mail in DATA_DIR/mail.log before answering, and prints it without the token', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'resource-api-mail-'));
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }));
    const { app: dev, logs: devLogs } = await buildTestApp({ NODE_ENV: 'development', DATA_DIR: dataDir });
    const user = await createUser(dev);

    const response = await dev.inject({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-resets`,
      headers: { authorization: await bearer({ sub: String(user.id), scope: 'users:write' }) },
    });
    const kept = readFileSync(join(dataDir, 'mail.log'), 'utf8'); // at once: written before the answer
    const token = /\/api\/public\/password-reset#token=([A-Za-z0-9_-]+)/.exec(kept)?.[1];
    const printed = await until('the printed mail', () =>
      devLogs.find((l) => typeof l.msg === 'string' && l.msg.includes('mail.log instead of sent')),
    );
    const done = await dev.inject({
      method: 'POST',
      url: '/api/public/password-resets/completion',
      payload: { token, newPassword: 'printed and used' },
    });

    expect(response.statusCode).toBe(202);
    expect(kept).toContain(`To: ${user.name} <${user.email}>`);
    expect(token).toBeDefined();
    expect(printed.msg).toContain('/api/public/password-reset#token=[redacted]');
    expect(devLogs.filter((l) => JSON.stringify(l).includes(token!))).toEqual([]);
    expect(done.statusCode).toBe(204);
  });

  it('production answers 202 and warns that no mail channel is configured, without the link', async () => {
    const { app: prod, logs: prodLogs } = await buildTestApp({ PASSWORD_RESET_URL: RESET_URL });
    const user = await createUser(prod);
    const response = await prod.inject({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-resets`,
      headers: { authorization: await bearer({ sub: String(user.id), scope: 'users:write' }) },
    });
    expect(response.statusCode).toBe(202);
    const warned = await until('the warn line', () =>
      prodLogs.find((l) => typeof l.msg === 'string' && l.msg.includes('no mail channel is configured')),
    );
    expect(warned.level).toBe(40);
    expect(prodLogs.some((l) => JSON.stringify(l).includes('app.example.com'))).toBe(false);
  });
});

describe('the anonymous quota', () => {
  it('counts completions without a bearer token', async () => {
    const { app: limited } = await buildTestApp({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '2' });
    await clearOfMinuteBoundary(); // the three requests in one of the quota's minutes
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await limited.inject({
        method: 'POST',
        url: '/api/public/password-resets/completion',
        payload: { token: 'not-a-token', newPassword: 'a good long password' },
      });
      statuses.push(response.statusCode);
    }
    expect(statuses).toEqual([400, 400, 429]);
  });
});

describe('GET /api/public/password-reset', () => {
  it('serves the page, its script and its style under the noun path, the page under a strict policy', async () => {
    const [page, script, style] = await Promise.all(
      ['', '.js', '.css'].map((suffix) => app.inject({ method: 'GET', url: `/api/public/password-reset${suffix}` })),
    );

    expect([page!.statusCode, script!.statusCode, style!.statusCode]).toEqual([200, 200, 200]);
    expect(page!.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page!.headers['cache-control']).toBe('no-store');
    expect(page!.headers['referrer-policy']).toBe('no-referrer');
    expect(page!.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page!.body).toContain('<script src="password-reset.js" defer></script>');
    expect(page!.body).toContain('<link rel="stylesheet" href="password-reset.css" />');
    expect(script!.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script!.body).toContain('window.location.hash');
    expect(style!.headers['content-type']).toBe('text/css; charset=utf-8');
  });

  it('answers the old verb paths 404, as any unknown path', async () => {
    const paths = ['/api/public/reset-password', '/api/public/reset-password.js', '/api/public/reset-password.css'];

    const answers = await Promise.all(paths.map((url) => app.inject({ method: 'GET', url })));
    const unknown = await app.inject({ method: 'GET', url: '/api/public/no-such-page' });

    expect(answers.map((a) => a.statusCode)).toEqual([404, 404, 404]);
    expect(answers.map((a) => a.json<{ title: string }>().title)).toEqual(
      Array(3).fill(unknown.json<{ title: string }>().title),
    );
  });

  it('is the default PASSWORD_RESET_URL, with the token in the fragment', async () => {
    const { config } = await buildTestApp({ BASE_URL: 'https://api.example.com/' });

    expect(config.passwordReset.urlTemplate).toBe('https://api.example.com/api/public/password-reset#token={token}');
  });
});
