// Outgoing mail (the password reset's link, docs/api-guide.md "Password reset"). Sent through
// SMTP with nodemailer, after the request has answered: a mail server that is slow or down never
// fails or slows the request. A failed send is retried with backoff and logged at warn with the
// server's error only, never the message (it carries a secret link).
//
// Without SMTP_URL: development keeps each mail in a file (DATA_DIR/mail.log, what a local mail
// catcher would show, so that `npm start` shows the whole flow; `npm run -s reset-token` reads the
// last link's token from it) and prints it to the log too, its link's token redacted as in every
// line (docs/operations.md#logs); every other environment logs at warn that no mail channel is
// configured, without the message.
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
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
  /** Development without SMTP_URL: the file each mail is appended to (and printed) instead of sent. */
  fileWithoutSmtp: string | undefined;
  /** The waits before each retry (the first attempt is immediate). */
  retryDelaysMs?: readonly number[];
  /** Gives up on one attempt after this long (connecting, greeting, each command). */
  timeoutMs?: number;
}

export const DEFAULT_MAIL_RETRY_DELAYS_MS = [2_000, 10_000, 60_000];

export function createMailer(options: MailerOptions, log: FastifyBaseLogger): Mailer {
  if (options.smtpUrl === undefined)
    return options.fileWithoutSmtp === undefined ? absentMailer(log) : filingMailer(options.fileWithoutSmtp, log);
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

/** Header line of each mail in the file: the tools that read it look for the last one. */
export const MAIL_FILE_SEPARATOR = '-----';

function filingMailer(file: string, log: FastifyBaseLogger): Mailer {
  return {
    send: (mail, what, to = log) => {
      const head = `To: ${mail.to.name} <${mail.to.address}>\nSubject: ${mail.subject}`;
      // Written before the request answers (a synchronous append: development only), so that a
      // command run after the answer finds the mail.
      mkdirSync(dirname(file), { recursive: true });
      appendFileSync(file, `${MAIL_FILE_SEPARATOR} ${new Date().toISOString()} ${what}\n${head}\n\n${mail.text}\n`, {
        mode: 0o600,
      });
      to.info(
        { mail: { to: `${mail.to.name} <${mail.to.address}>`, subject: mail.subject }, file },
        `${what} mail (development, no SMTP_URL: kept in ${file} instead of sent)\n\n${mail.text}`,
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

/** Where development keeps the mails it does not send: DATA_DIR/mail.log, as an absolute path. */
export function developmentMailFile(dataDir: string): string {
  return resolve(dataDir, 'mail.log');
}
