// Deep pages by number (db/keyset.ts pageAndTotal): from FROM_THE_END_AFTER rows on, a page in
// the second half of its list is read from the end, backwards on the same index. Its rows must
// be exactly those of the plain `order by … limit … offset …` the spec describes, for every
// sort and direction, with a filter, at the last page, a partial last page and past the end.
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { FROM_THE_END_AFTER } from '../../src/db/keyset.js';
import { asAdmin } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);
const ROWS = FROM_THE_END_AFTER + 2_345;
const SIZE = 100;

beforeAll(async () => {
  // Many ties on every sort column: 300 names, 60 creation instants, 40 totals, 5 statuses.
  await sql`insert into users (name, email, password_hash, created_at)
    select 'User ' || (g % 300), 'u' || (g * 7919 % ${ROWS}) || '@example.com', 'x',
           timestamptz '2026-01-01' + (g % 60) * interval '1 second'
      from generate_series(1, ${ROWS}) g`.execute(app.db);
  await sql`insert into orders (customer_id, status, total, item_count, created_at)
    select 1 + g % 9, (array['PENDING','CONFIRMED','SHIPPED','DELIVERED','CANCELLED'])[1 + g % 5],
           (g % 40) + 0.25, 1, timestamptz '2026-01-01' + (g % 60) * interval '1 second'
      from generate_series(1, ${ROWS * 5}) g`.execute(app.db);
});

/** The ids of one page as a plain offset query gives them. */
async function expected(query: string, offset: number): Promise<number[]> {
  const { rows } = await sql<{ id: number | string }>`${sql.raw(query)} limit ${SIZE} offset ${offset}`.execute(app.db);
  return rows.map((r) => Number(r.id));
}

async function served(url: string): Promise<{ ids: number[]; total: number }> {
  const response = await api({ method: 'GET', url });
  expect(response.statusCode, response.body).toBe(200);
  const body = response.json<{ content: { id: number }[]; totalElements: number }>();
  return { ids: body.content.map((r) => r.id), total: body.totalElements };
}

const lastPage = Math.ceil(ROWS / SIZE) - 1;
// The first page read from the end, the middle, the last (partial), and one past it.
const PAGES = [FROM_THE_END_AFTER / SIZE, Math.floor(lastPage / 2), lastPage - 1, lastPage, lastPage + 1];

describe('users, pages by number deep in the list', () => {
  const COLUMNS = { id: 'id', name: 'name', email: 'email', createdAt: 'created_at' } as const;
  for (const [sort, column] of Object.entries(COLUMNS)) {
    for (const dir of ['asc', 'desc'] as const) {
      it(`sort=${sort},${dir}`, async () => {
        const order = column === 'id' ? `id ${dir}` : `${column} ${dir}, id asc`;
        for (const page of PAGES) {
          const { ids, total } = await served(`/api/v1/users?size=${SIZE}&page=${page}&sort=${sort},${dir}`);
          expect(total).toBe(ROWS);
          expect(ids, `page ${page}`).toEqual(await expected(`select id from users order by ${order}`, page * SIZE));
        }
      });
    }
  }
});

describe('orders, pages by number deep in the list', () => {
  const COLUMNS = { id: 'id', createdAt: 'created_at', total: 'total', status: 'status' } as const;
  for (const [sort, column] of Object.entries(COLUMNS)) {
    for (const dir of ['asc', 'desc'] as const) {
      it(`sort=${sort},${dir}, all and ?status=SHIPPED`, async () => {
        const order = column === 'id' ? `id ${dir}` : `${column} ${dir}, id ${dir}`;
        const all = Math.ceil((ROWS * 5) / SIZE) - 1;
        for (const page of [FROM_THE_END_AFTER / SIZE, all - 3, all, all + 1]) {
          const { ids } = await served(`/api/v1/orders?size=${SIZE}&page=${page}&sort=${sort},${dir}`);
          expect(ids, `page ${page}`).toEqual(await expected(`select id from orders order by ${order}`, page * SIZE));
        }
        for (const page of PAGES) {
          const { ids, total } = await served(
            `/api/v1/orders?size=${SIZE}&page=${page}&sort=${sort},${dir}&status=SHIPPED`,
          );
          expect(total).toBe(ROWS);
          expect(ids, `SHIPPED page ${page}`).toEqual(
            await expected(`select id from orders where status = 'SHIPPED' order by ${order}`, page * SIZE),
          );
        }
      });
    }
  }
});
