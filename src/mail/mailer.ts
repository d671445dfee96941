// Outgoing mail (the password reset's link, docs/api-guide.md "Password reset"). Sent through
// SMTP with nodemailer, after the request has answered: a mail server that is slow or down never
// fails or slows the request. A failed send is retried with backoff and logged at warn with the
// server's error only, never the message (it carries a secret link).
//
// Without SMTP_URL: development prints the mail to the log (what a local mail catcher would
// show, so that `npm start` shows the whole flow); every other environment logs at warn that no
// mail channel is configured, without the message.
import type { FastifyBaseLogger } from 'fastify';
import { createTransport, type Transporter } from 'nodemailer';

export interface Mail {
  to: { name: string; address: string };
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  /**
   * Queues `mail`; resolves at once. `what` names it in log lines ("password reset"), written
   * to `log` when given (the request's: its lines carry the request's id and trace).
   */
  send(mail: Mail, what: string, log?: FastifyBaseLogger): void;
  /** Stops retrying and closes the transport; mails still waiting for a retry are dropped. */
  close(): Promise<void>;
}

export interface MailerOptions {
  /** smtp:// or smtps:// with credentials in the URL; undefined: no channel. */
  smtpUrl: string | undefined;
  from: string;
  /** development without SMTP_URL prints mails instead. */
  printWithoutSmtp: boolean;
  /** The waits before each retry (the first attempt is immediate). */
  retryDelaysMs?: readonly number[];
  /** Gives up on one attempt after this long (connecting, greeting, each command). */
  timeoutMs?: number;
}

export const DEFAULT_MAIL_RETRY_DELAYS_MS = [2_000, 10_000, 60_000];

export function createMailer(options: MailerOptions, log: FastifyBaseLogger): Mailer {
  if (options.smtpUrl === undefined) return options.printWithoutSmtp ? printingMailer(log) : absentMailer(log);
  return smtpMailer(options.smtpUrl, options, log);
}

function smtpMailer(url: string, options: MailerOptions, log: FastifyBaseLogger): Mailer {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const transport: Transporter = createTransport({
    url,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  });
  const delays = options.retryDelaysMs ?? DEFAULT_MAIL_RETRY_DELAYS_MS;
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const attempt = (mail: Mail, what: string, number: number, log: FastifyBaseLogger): void => {
    transport
      .sendMail({
        from: options.from,
        to: { name: mail.to.name, address: mail.to.address },
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
      })
      .catch((error: unknown) => {
        if (closed) return;
        const delay = delays[number - 1];
        // The server's own words (code, response): never the message, which holds the link.
        const { code, responseCode } = error as { code?: string; responseCode?: number };
        const reason = { code, responseCode, message: (error as Error).message };
        if (delay === undefined) {
          log.warn({ mail: what, attempt: number, reason }, `${what} mail not sent; giving up`);
          return;
        }
        log.warn(
          { mail: what, attempt: number, reason, retryInMs: delay },
          `${what} mail not sent; retrying in ${Math.round(delay / 1000)} s`,
        );
        const timer = setTimeout(() => {
          timers.delete(timer);
          attempt(mail, what, number + 1, log);
        }, delay);
        timer.unref();
        timers.add(timer);
      });
  };

  return {
    send: (mail, what, to = log) => {
      if (!closed) attempt(mail, what, 1, to);
    },
    close: async () => {
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      transport.close();
    },
  };
}

function printingMailer(log: FastifyBaseLogger): Mailer {
  return {
    send: (mail, what, to = log) => {
      to.info(
        { mail: { to: `${mail.to.name} <${mail.to.address}>`, subject: mail.subject } },
        `${what} mail (development, no SMTP_URL: printed here instead of sent)\n\n${mail.text}`,
      );
    },
    close: async () => {},
  };
}

function absentMailer(log: FastifyBaseLogger): Mailer {
  return {
    send: (_mail, what, to = log) => {
      to.warn({ mail: what }, `${what} mail not sent: no mail channel is configured (set SMTP_URL)`);
    },
    close: async () => {},
  };
}
