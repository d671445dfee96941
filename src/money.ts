// Exact money (docs/api-guide.md#orders): amounts are decimal strings with two places, computed in integer
// cents (BigInt), never in binary floating point.

const SCALE = 100n;

/** "19.99" → 1999n. Accepts up to two decimals; throws on anything else. */
export function toCents(amount: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d{1,2}))?$/.exec(amount.trim());
  if (m === null) throw new RangeError(`Not a money amount: ${amount}`);
  const [, sign, units = '0', fraction = ''] = m;
  const cents = BigInt(units) * SCALE + BigInt(fraction.padEnd(2, '0'));
  return sign === '-' ? -cents : cents;
}

/** 5997n → "59.97" */
export function fromCents(cents: bigint): string {
  const sign = cents < 0n ? '-' : '';
  const abs = cents < 0n ? -cents : cents;
  return `${sign}${abs / SCALE}.${(abs % SCALE).toString().padStart(2, '0')}`;
}

/** unit price × quantity, exactly. */
export function lineTotal(unitPrice: string, quantity: number): string {
  return fromCents(toCents(unitPrice) * BigInt(quantity));
}

/** A JSON number that prints exactly as the decimal string (two places at most). */
export function toJsonNumber(amount: string): number {
  return Number(amount);
}

/** A price sent as a JSON number (validated to two decimals) → its exact decimal string. */
export function fromJsonNumber(value: number): string {
  return value.toFixed(2);
}
