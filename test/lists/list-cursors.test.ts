// Seek links (docs/lists.md): Link prev/next carry a signed cursor beside page. Following them
// gives exactly the pages the page numbers give when nothing changes, skips and repeats no row
// while rows are added and removed, and any cursor that is not the one the service made for
// this list, query, page and size is a 400 in the route's own validation form.
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { aCustomer, asAdmin, createProduct, createUser, placeOrder } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const { app } = await buildTestApp();
const api = asAdmin(app);

interface Envelope {
  content: { id: number; [member: string]: unknown }[];
  number: number;
  totalPages: number;
}

/** The Link header's targets by rel, as paths with their query. */
function links(header: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of String(header).split(', ')) {
    const m = /^<https?:\/\/[^/]+([^>]*)>; rel="(\w+)"$/.exec(part);
    if (m) out[m[2]!] = m[1]!;
  }
  return out;
}

async function get(url: string): Promise<{ body: Envelope; links: Record<string, string> }> {
  const response = await api({ method: 'GET', url });
  expect(response.statusCode, `${url}: ${response.body}`).toBe(200);
  return { body: response.json<Envelope>(), links: links(response.headers.link) };
}

/** Every page from the first, following rel="next"; then back from there along rel="prev". */
async function walk(url: string): Promise<{ forward: Envelope[]; backward: Envelope[] }> {
  const forward: Envelope[] = [];
  let page = await get(url);
  forward.push(page.body);
  while (page.links.next !== undefined) {
    expect(page.links.next).toMatch(/&cursor=[\w-]+\.[\w-]{22}$/);
    page = await get(page.links.next);
    forward.push(page.body);
  }
  const backward: Envelope[] = [page.body];
  while (page.links.prev !== undefined) {
    page = await get(page.links.prev);
    backward.unshift(page.body);
  }
  return { forward, backward };
}

beforeAll(async () => {
  // Ties on every sort column: names repeat, and a bulk insert gives many rows one created_at.
  for (let i = 0; i < 12; i++) await createUser(app, { name: `Tied ${i % 3}` });
  await sql`insert into users (name, email, password_hash)
    select 'Bulk ' || (g % 4), 'bulk' || g || '@example.com', 'x' from generate_series(1, 14) g`.execute(app.db);
  const product = await createProduct(app, { price: 5 }, 10_000);
  const customer = await aCustomer(app);
  for (let i = 0; i < 23; i++) {
    expect((await placeOrder(app, customer.auth, product.id, 1 + (i % 3))).statusCode).toBe(201);
  }
  await sql`update orders set status = 'CONFIRMED' where id % 3 = 0`.execute(app.db);
});

describe('following Link next and prev', () => {
  const cases: string[] = [];
  for (const version of ['v1', 'v2']) {
    for (const sort of ['id', 'name', 'email', 'createdAt']) {
      for (const dir of ['asc', 'desc']) cases.push(`/api/${version}/users?size=4&sort=${sort},${dir}`);
    }
    for (const sort of ['id', 'createdAt', 'total', 'status']) {
      for (const dir of ['asc', 'desc']) {
        cases.push(`/api/${version}/orders?size=4&sort=${sort},${dir}`);
        cases.push(`/api/${version}/orders?size=5&sort=${sort},${dir}&status=CONFIRMED`);
      }
    }
  }
  cases.push('/api/v1/users?size=6', '/api/v1/orders?size=6');

  it.each(cases)('%s gives exactly the pages by number, both ways', async (url) => {
    const { forward, backward } = await walk(url);
    const byNumber = await Promise.all(forward.map((_, n) => get(`${url}&page=${n}`)));
    expect(forward.length).toBe(forward[0]!.totalPages);
    expect(forward).toEqual(byNumber.map((p) => p.body));
    expect(backward).toEqual(forward);
  });
});

describe('while rows are added and removed', () => {
  it('a walk along next skips and repeats no row that was there throughout', async () => {
    const url = '/api/v1/users?size=5&sort=name,asc';
    const idsOf = async () => {
      const all = (await get('/api/v1/users?size=100&sort=name,asc')).body;
      return all.content.map((u) => u.id);
    };
    const before = await idsOf();
    const seen: number[] = [];
    const deleted = new Set<number>();
    let page = await get(url);
    let step = 0;
    for (;;) {
      seen.push(...page.body.content.map((u) => u.id));
      // Between two pages: a row before the walk's position and one after it appear, and a
      // row already seen and one not yet seen go.
      await createUser(app, { name: `AAA inserted ${step}` });
      await createUser(app, { name: `zzz inserted ${step}` });
      const ahead = before.find((id) => !seen.includes(id) && !deleted.has(id));
      const behind = seen.find((id) => !deleted.has(id));
      for (const id of [ahead, behind]) {
        if (id === undefined) continue;
        expect((await api({ method: 'DELETE', url: `/api/v1/users/${id}` })).statusCode).toBe(204);
        deleted.add(id);
      }
      step++;
      if (page.links.next === undefined) break;
      page = await get(page.links.next);
    }
    expect(new Set(seen).size, 'no row repeated').toBe(seen.length);
    // Rows deleted before the walk reached them are rightly never seen; every other one is.
    const survivors = before.filter((id) => !deleted.has(id));
    expect(
      survivors.filter((id) => !seen.includes(id)),
      'no row skipped',
    ).toEqual([]);
    // And in the list's order: the ids seen are a subsequence of the whole list today, with
    // the rows deleted since taken out.
    const now = await idsOf();
    const order = new Map(now.map((id, i) => [id, i]));
    const positions = seen.filter((id) => order.has(id)).map((id) => order.get(id)!);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
  });

  it('a cursor whose row was deleted still seeks to the rows after it', async () => {
    const url = '/api/v1/orders?size=3&sort=total,desc';
    const page1 = await get(`${url}&page=1`);
    const page2 = await get(`${url}&page=2`);
    const cursorRow = page1.body.content.at(-1)!;
    expect((await api({ method: 'DELETE', url: `/api/v1/orders/${cursorRow.id}` })).statusCode).toBe(204);
    const next = await get(page1.links.next!);
    expect(next.body.content).toEqual(page2.body.content);
  });
});

describe('a cursor that is not this page’s', () => {
  async function cursorFor(url: string): Promise<{ next: string; cursor: string }> {
    const next = (await get(url)).links.next!;
    return { next, cursor: new URL(next, 'http://x').searchParams.get('cursor')! };
  }

  /** The query string of `next` with members changed. */
  function changed(next: string, changes: Record<string, string>): string {
    const u = new URL(next, 'http://x');
    for (const [k, v] of Object.entries(changes)) u.searchParams.set(k, v);
    return `${u.pathname}?${u.searchParams.toString()}`;
  }

  /** The messages about `cursor` in a 400, whatever the route's form. */
  function cursorMessages(body: Record<string, unknown>): string[] {
    const errors = [...((body.errors ?? []) as unknown[]), ...((body.fieldErrors ?? []) as unknown[])];
    return errors.flatMap((e) => {
      if (typeof e === 'string') return e.startsWith('cursor: ') ? [e.slice('cursor: '.length)] : [];
      const { field, message } = e as { field: string; message: string };
      return field === 'cursor' ? [message] : [];
    });
  }

  it('is refused when tampered with, malformed, or made for another sort, filter, list, page or size', async () => {
    const { next, cursor } = await cursorFor('/api/v1/orders?size=2&sort=total,asc&status=PENDING');
    const [payload, signature] = cursor.split('.') as [string, string];
    const flipped = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const usersNext = (await cursorFor('/api/v1/users?size=2')).cursor;
    const refusals: [string, RegExp][] = [
      [changed(next, { cursor: `${flipped(payload, 5)}.${signature}` }), /not a valid cursor/],
      [changed(next, { cursor: `${payload}.${flipped(signature, 3)}` }), /not a valid cursor/],
      [changed(next, { cursor: 'nonsense' }), /not a valid cursor/],
      [changed(next, { cursor: payload }), /not a valid cursor/],
      [changed(next, { sort: 'total,desc' }), /another list, sort or filter/],
      [changed(next, { sort: 'createdAt,asc' }), /another list, sort or filter/],
      [changed(next, { status: 'CONFIRMED' }), /another list, sort or filter/],
      [changed(next, { customerId: '1' }), /another list, sort or filter/],
      [changed(next, { page: '7' }), /another page or page size/],
      [changed(next, { size: '3' }), /another page or page size/],
      [changed(next.replace('/orders', '/users'), { sort: 'id' }).replace(/&status=\w+/, ''), /another list/],
      [`/api/v1/orders?size=2&page=1&cursor=${usersNext}`, /another list, sort or filter/],
    ];
    for (const [url, message] of refusals) {
      const response = await api({ method: 'GET', url });
      expect(response.statusCode, `${url}: ${response.body}`).toBe(400);
      const messages = cursorMessages(response.json());
      expect(messages.length, `${url}: ${response.body}`).toBe(1);
      expect(messages[0], url).toMatch(message);
    }
  });

  it('is refused in the users v1 form and in the typed form of v2', async () => {
    const { next } = await cursorFor('/api/v1/users?size=2&sort=email,desc');
    const v1 = await api({ method: 'GET', url: changed(next, { sort: 'email,asc' }) });
    expect(v1.statusCode).toBe(400);
    expect(v1.json()).toMatchObject({
      title: 'Validation Error',
      errors: [{ field: 'cursor', message: 'belongs to another list, sort or filter' }],
    });
    const v2next = (await cursorFor('/api/v2/orders?size=2')).next;
    const v2 = await api({ method: 'GET', url: changed(v2next, { page: '3' }) });
    expect(v2.statusCode).toBe(400);
    expect(v2.json()).toMatchObject({
      title: 'Validation Failed',
      fieldErrors: [{ field: 'cursor', message: 'belongs to another page or page size' }],
    });
  });

  it('is good on every version of the same list (the rows are the same)', async () => {
    const { next } = await cursorFor('/api/v1/users?size=3&sort=name,desc');
    const viaV1 = await get(next);
    const viaV2 = await get(next.replace('/api/v1/', '/api/v2/'));
    expect(viaV2.body.content.map((u) => u.id)).toEqual(viaV1.body.content.map((u) => u.id));
  });
});
