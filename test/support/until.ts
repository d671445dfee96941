// Waits for something the service does in the background (a delivery, a mail, an export):
// `probe` until it gives a value other than undefined or false, every 20 ms, or fails after `ms`
// naming `what`.
export async function until<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 5000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Quotas count in minutes of the wall clock (rate limits): waits out the current minute when
 * fewer than 8 s of it are left, so that a test's requests fall in one window.
 */
export async function clearOfMinuteBoundary(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 8000) await new Promise((r) => setTimeout(r, left + 100));
}
