// npm run bench:pglite — what one primary-key read costs on the embedded engine: through
// PGlite's query() (six exchanges with the WebAssembly backend, parsed and planned every time)
// and through the service's named statements (src/db/pglite-statements.ts: parsed once, one
// exchange per read). CPU µs per read of this process, alternated over BENCH_ROUNDS rounds.
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import type { Database } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { pgliteDialect } from '../src/db/pglite-dialect.js';
import { PGliteStatements } from '../src/db/pglite-statements.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROWS = 1000;

const db = await PGlite.create();
// The service's own schema (its migrations: columns, list indexes, triggers), seeded by plain SQL.
await migrateToLatest(new Kysely<Database>({ dialect: pgliteDialect(db).dialect }));
await db.exec(`insert into users (name, email, password_hash)
  select 'Seed ' || i, 'seed' || i || '@example.com', 'x' from generate_series(1, ${ROWS}) i`);
const text =
  'select "id", "name", "email", "age", "address_street", "address_postal_code", "version", "created_at" from "users" where "id" = $1';
const statements = new PGliteStatements(db);
const ways: [string, (id: number) => Promise<unknown>][] = [
  ['query()', (id) => db.query(text, [id])],
  ['named statement', (id) => statements.query(text, [id])],
];

async function measure(read: (id: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 2000; i++) await read(1 + (i % ROWS)); // warm up
  const start = process.cpuUsage();
  for (let i = 0; i < ITERATIONS; i++) await read(1 + (i % ROWS));
  const { user, system } = process.cpuUsage(start);
  return (user + system) / ITERATIONS;
}

const results = new Map<string, number[]>();
for (let round = 1; round <= ROUNDS; round++) {
  for (const [name, read] of ways) {
    const us = await measure(read);
    results.set(name, [...(results.get(name) ?? []), us]);
    console.log(`round ${round}/${ROUNDS}  ${name.padEnd(16)} ${us.toFixed(1).padStart(7)} µs of CPU per read`);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const [viaQuery, viaNamed] = ways.map(([name]) => median(results.get(name) ?? []));
console.log(
  `\nmedians: query() ${viaQuery?.toFixed(1)} µs, named statement ${viaNamed?.toFixed(1)} µs per read (${((viaQuery ?? NaN) / (viaNamed ?? NaN)).toFixed(1)}× less CPU)`,
);
await db.close();
