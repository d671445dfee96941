// The password reset's mail (docs/api-guide.md#users): a subject a person recognises, a plain-text and an
// HTML part, and the link built from PASSWORD_RESET_URL. Pure, but for the hand-off to the mailer.
import type { Config } from '../config/config.js';
import type { Mail, Mailer } from '../mail/mailer.js';
import type { PasswordResetDelivery } from './users.service.js';

export function passwordResetDelivery(
  settings: Config['passwordReset'],
  mailer: Mailer,
  log?: Parameters<Mailer['send']>[2],
): PasswordResetDelivery {
  return {
    ttlMinutes: settings.ttlMinutes,
    send: (to, token) => {
      const link = settings.urlTemplate.replaceAll('{token}', encodeURIComponent(token));
      mailer.send(passwordResetMail(to, link, settings.ttlMinutes), 'password reset', log);
    },
  };
}

export function passwordResetMail(to: { name: string; email: string }, link: string, ttlMinutes: number): Mail {
  const within = ttlMinutes % 60 === 0 ? plural(ttlMinutes / 60, 'hour') : plural(ttlMinutes, 'minute');
  const text = [
    `Hello ${to.name},`,
    '',
    `Someone, hopefully you, asked to reset the password of your account (${to.email}).`,
    `To choose a new password, open this link within ${within}:`,
    '',
    link,
    '',
    'The link works once. If you did not ask for it, ignore this mail: your password stays as it is.',
    '',
  ].join('\n');
  const html = `<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5">
<p>Hello ${escapeHtml(to.name)},</p>
<p>Someone, hopefully you, asked to reset the password of your account (${escapeHtml(to.email)}).
To choose a new password, open this link within ${within}:</p>
<p><a href="${escapeHtml(link)}">Choose a new password</a></p>
<p style="color: #555">Or copy this address into your browser: ${escapeHtml(link)}</p>
<p>The link works once. If you did not ask for it, ignore this mail: your password stays as it is.</p>
</body></html>
`;
  return { to: { name: to.name, address: to.email }, subject: 'Reset your password', text, html };
}

function plural(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
