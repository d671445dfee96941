// Debian's Chromium, driven by playwright-core (`npx playwright install` cannot reach its
// downloads here): where it is, whether a file's browser tests can run, and how they launch it.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { engine } from './test-app.js';
import { required } from './required.js';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether `file`'s browser tests run: once, in the embedded run; in CI a missing Chromium fails. */
export function chromiumAvailable(file: string): boolean {
  return (
    engine !== 'pglite' ||
    required(file, existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (apt-get install -y chromium)`)
  );
}

/** Headless, with nothing of its own going out (no updates, sync or background traffic). */
export function launchChromium(args: readonly string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...args,
    ],
  });
}
