// An SMTP server on 127.0.0.1 that keeps every mail it receives, parsed: where the service's
// password-reset mails go in the tests that read them.
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface MailCatcher {
  /** SMTP_URL for the service. */
  url: string;
  /** Every mail received so far, in order. */
  received: ParsedMail[];
  close(): Promise<void>;
}

export async function mailCatcher(): Promise<MailCatcher> {
  const received: ParsedMail[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, done) {
      simpleParser(stream).then(
        (mail) => {
          received.push(mail);
          done();
        },
        (error: unknown) => done(error as Error),
      );
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const { port } = smtp.server.address() as { port: number };
  return {
    url: `smtp://127.0.0.1:${String(port)}`,
    received,
    close: () => new Promise<void>((resolve) => smtp.close(() => resolve())),
  };
}
