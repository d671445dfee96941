// Every list sort, in each direction and under each filter, finds its page through an index
// (migration 0008, db/keyset.ts): a page by number reads its keys with an index-only scan and
// then just those rows; a page by cursor seeks on the same index. EXPLAIN proves it for the
// very statements the service sends, on both engines. The planner is told not to use a
// sequential scan, a bitmap scan or a sort, so that on these small tables it shows what it can
// do: a plan that still sorts has no index for that order.
import { CompiledQuery, sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import type { PageMode } from '../../src/db/keyset.js';
import type { Statement } from '../../src/db/prepared.js';
import { orderListStatements, type OrderListParams } from '../../src/orders/orders.repository.js';
import { userPageStatement, type UserListParams } from '../../src/users/users.repository.js';
import type { Seek } from '../../src/page.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Scan Direction'?: string;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

beforeAll(async () => {
  await sql`insert into users (name, email, password_hash, created_at)
    select 'User ' || (g % 5000), 'u' || g || '@example.com', 'x', now() - g * interval '1 minute'
      from generate_series(1, 20000) g`.execute(app.db);
  // One customer has 20 orders in 20,000, and SHIPPED is one order in a hundred: filters that
  // only an index serves well, as in production.
  await sql`insert into orders (customer_id, status, total, item_count, created_at)
    select g % 1000, case when g % 100 = 0 then 'SHIPPED' else (array['PENDING','CONFIRMED','DELIVERED','CANCELLED'])[1 + g % 4] end,
           (g % 90) + 0.5, 1, now() - g * interval '1 minute'
      from generate_series(1, 20000) g`.execute(app.db);
  await sql`vacuum analyze users`.execute(app.db);
  await sql`vacuum analyze orders`.execute(app.db);
});

async function explain(statement: Statement): Promise<PlanNode> {
  return app.db.transaction().execute(async (trx) => {
    for (const setting of ['enable_seqscan', 'enable_bitmapscan', 'enable_sort']) {
      await sql`select set_config(${setting}, 'off', true)`.execute(trx);
    }
    const { rows } = await trx.executeQuery<{ 'QUERY PLAN': unknown }>(
      CompiledQuery.raw(`explain (format json) ${statement.sql}`, statement.parameters),
    );
    const raw = rows[0]?.['QUERY PLAN'];
    const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }];
    return plan[0].Plan;
  });
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * The page's rows come from `Limit` over an index scan, unsorted: index-only for a page by
 * number; and the filters are conditions of the index, not filters of the rows it returns.
 */
function expectIndexedPage(plan: PlanNode, only: boolean, filters: string[] = []): void {
  const limit = nodes(plan).find((n) => n['Node Type'] === 'Limit');
  expect(limit, JSON.stringify(plan)).toBeDefined();
  const below = nodes(limit!).slice(1);
  // Neither a Sort nor an Incremental Sort (an index on the column alone, ties sorted after).
  expect(
    below.filter((n) => n['Node Type'].includes('Sort')),
    JSON.stringify(plan),
  ).toEqual([]);
  const scan = below.find((n) => n['Node Type'].startsWith('Index'));
  expect(scan?.['Node Type'], JSON.stringify(plan)).toMatch(only ? /^Index Only Scan$/ : /^Index (Only )?Scan$/);
  for (const column of filters) expect(scan?.['Index Cond'], JSON.stringify(plan)).toContain(column);
}

const SEEKS: [string, Seek | undefined, PageMode][] = [
  ['by page number', undefined, 'offset'],
  ['by page number from the end', undefined, 'offset-from-end'],
  ['after a cursor', { after: true, value: '', id: 200 }, 'after'],
  ['before a cursor', { after: false, value: '', id: 200 }, 'before'],
];

/** A real sort value for the seek: the text the service puts in a cursor. */
const USER_VALUES: Record<UserListParams['sort'], string> = {
  id: '200',
  name: 'User 20',
  email: 'u200@example.com',
  createdAt: new Date(Date.now() - 200 * 60_000).toISOString(),
};
const ORDER_VALUES: Record<OrderListParams['sort'], string> = {
  id: '200',
  createdAt: new Date(Date.now() - 200 * 60_000).toISOString(),
  total: '20.50',
  status: 'SHIPPED',
};

describe('users', () => {
  for (const sort of ['id', 'name', 'email', 'createdAt'] as const) {
    for (const direction of ['asc', 'desc'] as const) {
      for (const [how, seek, mode] of SEEKS) {
        it(`sort=${sort},${direction} ${how}`, async () => {
          const plan = await explain(
            userPageStatement(
              app.db,
              { sort, direction, limit: 20, offset: 200, seek: seek && { ...seek, value: USER_VALUES[sort] } },
              mode,
            ),
          );
          expectIndexedPage(plan, seek === undefined);
        });
      }
    }
  }
});

describe('orders', () => {
  const FILTERS: [string, Pick<OrderListParams, 'status' | 'customerId' | 'visibility'>][] = [
    ['all', { visibility: 'all' }],
    ['status', { visibility: 'all', status: 'SHIPPED' }],
    ['customerId', { visibility: 'all', customerId: 3 }],
    ['status and customerId', { visibility: 'all', status: 'SHIPPED', customerId: 3 }],
    ['a customer’s own', { visibility: { customerId: 3 } }],
    ['a customer’s own by status', { visibility: { customerId: 3 }, status: 'PENDING' }],
  ];
  for (const [filterName, filters] of FILTERS) {
    for (const sort of ['id', 'createdAt', 'total', 'status'] as const) {
      for (const direction of ['asc', 'desc'] as const) {
        for (const [how, seek, mode] of SEEKS) {
          it(`${filterName}, sort=${sort},${direction} ${how}`, async () => {
            const { page } = orderListStatements(
              app.db,
              {
                ...filters,
                sort,
                direction,
                limit: 20,
                offset: 10,
                seek: seek && { ...seek, value: ORDER_VALUES[sort] },
              },
              mode,
            );
            const filtered = [
              ...(filters.status !== undefined ? ['status ='] : []),
              ...(filters.customerId !== undefined || filters.visibility !== 'all' ? ['customer_id ='] : []),
            ];
            expectIndexedPage(await explain(page), seek === undefined, filtered);
          });
        }
      }
    }
  }

  it('counts one customer’s orders through an index, and reads every other total from the counters', async () => {
    const base = { sort: 'id', direction: 'asc', limit: 20, offset: 0 } as const;
    for (const filters of FILTERS.map(([, f]) => f)) {
      const { count } = orderListStatements(app.db, { ...base, ...filters });
      const plan = nodes(await explain(count));
      if (filters.customerId === undefined && filters.visibility === 'all') {
        expect(count.sql).toContain('row_counts');
      } else {
        expect(count.sql).not.toContain('row_counts');
        expect(
          plan.map((n) => n['Node Type']),
          JSON.stringify(plan),
        ).toContain('Index Only Scan');
      }
    }
  });
});
