// The page a mailed reset link opens (docs/api-guide.md "Password reset"), in a real browser:
// Debian's Chromium, driven by playwright-core, opens the link of a mail that a real SMTP server
// on 127.0.0.1 received, types a new password and submits it; the user then proves the new
// password by changing it. A weak password shows the rule and keeps the form; a used or expired
// link says so. The page loads nothing but its own files, under a strict Content-Security-Policy
// that Chromium enforces (a violation would be a console error).
import { sql } from 'kysely';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium } from '../support/chromium.js';
import { createUser } from '../support/factories.js';
import { mailCatcher, type MailCatcher } from '../support/mail-catcher.js';
import { freePort } from '../support/private-postgres.js';
import { buildTestApp, engine, type TestApp } from '../support/test-app.js';
import { bearer } from '../support/tokens.js';
import { until } from '../support/until.js';

const available = chromiumAvailable('test/processes/reset-page.test.ts');

describe.runIf(engine === 'pglite' && available)('the password reset page in Chromium', () => {
  let mails: MailCatcher | undefined;
  let built: TestApp | undefined;
  let browser: Browser | undefined;
  let base: string;
  const problems: string[] = []; // console errors and requests leaving the page's origin

  beforeAll(async () => {
    mails = await mailCatcher();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // PASSWORD_RESET_URL left to its default: the link leads to the service's own page.
    built = await buildTestApp({
      BASE_URL: base,
      SMTP_URL: mails.url,
      SMTP_FROM: 'Shop <no-reply@shop.example>',
    });
    await built.app.listen({ port, host: '127.0.0.1' });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await built?.app.close();
    await mails?.close();
  });

  /** Asks for a reset of a new user as that user; the link of the mail it got. */
  async function mailedLink(): Promise<{ link: string; userId: number }> {
    const user = await createUser(built!.app);
    const received = mails!.received;
    const before = received.length;
    const asked = await built!.app.inject({
      method: 'POST',
      url: `/api/v1/users/${user.id}/password-resets`,
      headers: { authorization: await bearer({ sub: String(user.id), scope: 'users:write' }) },
    });
    expect(asked.statusCode).toBe(202);
    const mail = await until('the reset mail', () =>
      received.slice(before).find((m) => JSON.stringify(m.to).includes(user.email)),
    );
    const link = /(http:\/\/\S+\/api\/public\/password-reset#token=[A-Za-z0-9_%-]+)/.exec(mail.text ?? '')?.[1];
    expect(link, mail.text).toBeDefined();
    return { link: link!, userId: user.id };
  }

  async function open(link: string): Promise<Page> {
    const page = await browser!.newPage();
    page.on('console', (message) => {
      // A refusal of the completion is an answer the page reads (the responses are checked below).
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
        problems.push(`console: ${message.text()}`);
    });
    page.on('response', (answer) => {
      if (answer.status() >= 400 && !answer.url().endsWith('/api/public/password-resets/completion'))
        problems.push(`${answer.status()}: ${answer.url()}`);
    });
    page.on('request', (request) => {
      if (!request.url().startsWith(`${base}/`)) problems.push(`request: ${request.url()}`);
    });
    const response = await page.goto(link);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    return page;
  }

  async function submit(page: Page, password: string, again = password): Promise<string> {
    await page.getByLabel('New password', { exact: true }).fill(password);
    await page.getByLabel('The new password again').fill(again);
    await page.getByRole('button', { name: 'Set the new password' }).click();
    const status = page.getByRole('status');
    await expect
      .poll(async () => (await status.textContent()) ?? '', { timeout: 10_000 })
      .not.toMatch(/^$|^Setting the new password…$/);
    return (await status.textContent()) ?? '';
  }

  const changePassword = async (userId: number, currentPassword: string) =>
    built!.app.inject({
      method: 'POST',
      url: `/api/v1/users/${userId}/password-changes`,
      headers: { authorization: await bearer({ sub: String(userId), scope: 'users:write' }) },
      payload: { currentPassword, newPassword: 'and yet another password' },
    });

  it('opens the mailed link, sets the new password, and the user can use it; the link then says it was used', async () => {
    const { link, userId } = await mailedLink();
    const page = await open(link);

    const said = await submit(page, 'a brand new password');
    const formHidden = await page.locator('#reset').isHidden();
    const reused = await submit(await open(link), 'another new password');
    const proved = await changePassword(userId, 'a brand new password');

    expect(said).toBe('Your password has been changed. Sign in with the new password.');
    expect(formHidden).toBe(true);
    expect(reused).toBe('This link has expired or has already been used: ask for a new password reset.');
    expect(proved.statusCode).toBe(204);
    expect(problems).toEqual([]);
    // The token stays in the browser: the page's request line never carried it.
    const pageLines = built!.logs.filter((l) => String(l.url).startsWith('/api/public/password-reset'));
    expect(pageLines.map((l) => l.url)).toContain('/api/public/password-reset');
    expect(pageLines.filter((l) => String(l.url).includes('token'))).toEqual([]);
  });

  it('shows the rule for a weak password and keeps the form; two different entries are caught first', async () => {
    const { link, userId } = await mailedLink();
    const page = await open(link);

    const differ = await submit(page, 'a brand new password', 'a brand new passwort');
    const weak = await submit(page, 'short');
    const stillThere = await page.getByLabel('New password', { exact: true }).isVisible();
    const unchanged = await changePassword(userId, 'correct horse battery');

    expect(differ).toBe('The two passwords differ: type the same password in both fields.');
    expect(weak).toMatch(
      /^That password cannot be used \(size must be between 8 and 72\)\. Between 8 and 72 characters\./,
    );
    expect(stillThere).toBe(true);
    expect(unchanged.statusCode).toBe(204); // the weak one was not set
    expect(problems).toEqual([]);
  });

  it('says an expired link has expired, and a link without its token is incomplete', async () => {
    const { link, userId } = await mailedLink();
    await sql`update password_resets set expires_at = now() - interval '1 second' where user_id = ${userId}`.execute(
      built!.app.db,
    );

    const expired = await submit(await open(link), 'a brand new password');
    const bare = await open(link.replace(/#.*$/, ''));
    const incomplete = (await bare.getByRole('status').textContent()) ?? '';

    expect(expired).toBe('This link has expired or has already been used: ask for a new password reset.');
    expect(incomplete).toMatch(/^This link is incomplete/);
    expect(await bare.locator('#reset').isHidden()).toBe(true);
    expect(problems).toEqual([]);
  });
});
