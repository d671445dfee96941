// A suite that needs something the machine may lack (Redis, a redis-server binary, PostgreSQL's
// binaries for private clusters, Chromium). Locally it is skipped, saying so; in CI (CI=true,
// as .ci/run sets it), where everything is installed, a missing one fails the file, so that a
// suite never passes by not running.

/**
 * Whether the suite in `file` may run: true when `missing` is undefined; otherwise (`missing`
 * says what is absent) false with a warning locally, and an error in CI.
 */
export function required(file: string, missing: string | undefined): boolean {
  if (missing === undefined) return true;
  if (process.env.CI === 'true' || process.env.CI === '1') {
    throw new Error(`${file} cannot run in CI: ${missing}`);
  }
  console.warn(`\n*** SKIPPED ${file}: ${missing} ***\n`);
  return false;
}
