// npm run -s reset-token: the token of the last password reset mail that development kept in
// DATA_DIR/mail.log (no SMTP_URL: the mail is filed, not sent), for completing a reset from the
// command line (docs/api-guide.md "Password reset"): RESET=$(npm run -s reset-token)
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../src/config/config.js';
import { developmentMailFile, MAIL_FILE_SEPARATOR } from '../src/mail/mailer.js';

try {
  const file = developmentMailFile(loadConfig(process.env).dataDir);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    throw new ConfigError(
      `No mail in ${file}: ask for a reset first (development without SMTP_URL keeps its mails there; start the server with the same DATA_DIR)`,
    );
  }
  const mails = text.split(`${MAIL_FILE_SEPARATOR} `).filter((mail) => / password reset\n/.test(mail));
  const token = /[#?&]token=([A-Za-z0-9_%-]+)/.exec(mails.at(-1) ?? '')?.[1];
  if (token === undefined) throw new ConfigError(`No password reset mail in ${file}: ask for a reset first`);
  console.log(decodeURIComponent(token));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
