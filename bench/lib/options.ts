// The bench's options (its flags and BENCH_* variables) and the scratch directory every mode
// writes into. Nothing runs at import but reading them.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_POOL_SIZE } from '../../src/config/config.js';

export const ROOT = join(import.meta.dirname, '..', '..');
export const args = process.argv.slice(2);
export const flag = (name: string) => args.includes(name);
export const option = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);

export const DURATION = Number(process.env.BENCH_DURATION ?? 15);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
export const SOAK_MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
export const SLICE = 30;
/** Seconds of a case's own load before it is measured, in each round. */
export const WARM_UP = Number(process.env.BENCH_WARM_UP ?? 3);
export const POOL = Number(process.env.DATABASE_POOL_SIZE ?? DEFAULT_POOL_SIZE);
export const DB_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/resource_api_bench';
export const only = option('--only');
export const ONLY = only === undefined ? undefined : new RegExp(only);
export const USERS = 1000;
export const PRODUCTS = 100;
export const SECRET = 'benchmark-secret-benchmark-secret-benchmark';
export const ORIGIN = 'https://app.example.com';

/** The run's scratch directory: servers' logs, wrk scripts (made by makeWorkDirectory, in setUp). */
export let work = '';

export function makeWorkDirectory(): void {
  work = mkdtempSync(join(tmpdir(), 'resource-api-bench-'));
}

/** The bearer token every request of the bench sends (set by setUp). */
export let TOKEN = '';

export function setToken(token: string): void {
  TOKEN = token;
}
