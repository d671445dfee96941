import http from 'node:http';
import postgres from 'postgres';
import { DB_URL, POOL, TOKEN, f0, f1, f2, service, stopServer, table } from '../lib/common.js';

// ---- lists at scale ---------------------------------------------------------------------------

const SCALE_ROWS = Number(process.env.BENCH_SCALE_ROWS ?? 1_000_000);
const SCALE_SAMPLES = 20;

/** Seeds SCALE_ROWS users and orders through SQL, in the orders the lists do not use. */
async function seedAtScale(): Promise<void> {
  const sql = postgres(DB_URL, { max: 1, onnotice: () => {} });
  const started = performance.now();
  // Names, e-mails and creation times in an order of their own, not the ids'; 100,000 customers
  // with about ten orders each; statuses, totals and times scattered.
  await sql`insert into users (name, email, password_hash, created_at)
    select 'User ' || substr(md5(g::text), 1, 12), substr(md5((g * 7)::text), 1, 8) || g || '@example.com', 'x',
           timestamptz '2025-01-01' + ((g * 7919) % ${SCALE_ROWS}) * interval '1 second'
      from generate_series(1::bigint, ${SCALE_ROWS}::bigint) g`;
  await sql`insert into orders (customer_id, status, total, item_count, created_at)
    select 1 + (g * 7919) % 100000,
           (array['PENDING','CONFIRMED','SHIPPED','DELIVERED','CANCELLED'])[1 + (g * 31) % 5],
           ((g * 104729) % 100000) / 100.0, 1,
           timestamptz '2025-01-01' + ((g * 6151) % ${SCALE_ROWS}) * interval '1 second'
      from generate_series(1::bigint, ${SCALE_ROWS}::bigint) g`;
  await sql`vacuum analyze users`;
  await sql`vacuum analyze orders`;
  await sql`checkpoint`; // the load's dirty pages written now, not during the measurements
  console.log(
    `seeded ${f0(SCALE_ROWS)} users and ${f0(SCALE_ROWS)} orders in ${f1((performance.now() - started) / 1000)} s`,
  );
  await sql.end();
}

/** p50 and p95 of SCALE_SAMPLES sequential requests on one keep-alive connection (after 3 to warm up). */
async function latency(port: number, path: string): Promise<{ p50: number; p95: number; link: string }> {
  const times: number[] = [];
  let link = '';
  for (let i = 0; i < SCALE_SAMPLES + 3; i++) {
    const started = performance.now();
    const { status, headers } = await new Promise<{ status: number; headers: http.IncomingHttpHeaders }>(
      (resolve, reject) => {
        http
          .get(
            { host: '127.0.0.1', port, path, agent: keepAlive, headers: { authorization: `Bearer ${TOKEN}` } },
            (r) => {
              r.resume();
              r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers }));
            },
          )
          .on('error', reject);
      },
    );
    const ms = performance.now() - started;
    if (status !== 200) throw new Error(`${path}: ${status}`);
    link = String(headers.link ?? '');
    if (i >= 3) times.push(ms);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? NaN;
  return { p50: at(0.5), p95: at(0.95), link };
}
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });

export async function scale(): Promise<void> {
  const pg = await service('service-pg-scale', 18083, { DATABASE_URL: DB_URL, DATABASE_POOL_SIZE: String(POOL) });
  await seedAtScale();
  const deep = 25_000;
  const cases: [string, string, number][] = [
    ['GET /api/v1/users/{id}', '/api/v1/users/500000', 10],
    ['one customer’s orders', '/api/v1/orders?customerId=4242', 10],
    ['users, first page', '/api/v1/users?page=0', 10],
    ['orders, first page', '/api/v1/orders?page=0', 10],
    ['orders ?status=PENDING, first page', '/api/v1/orders?status=PENDING&page=0', 10],
  ];
  for (const sort of ['id', 'createdAt', 'email', 'name']) {
    for (const dir of ['asc', 'desc']) {
      cases.push([
        `users page ${f0(deep)}, sort=${sort},${dir}`,
        `/api/v1/users?page=${deep}&sort=${sort},${dir}`,
        100,
      ]);
    }
  }
  for (const sort of ['createdAt', 'id', 'total', 'status']) {
    for (const dir of ['desc', 'asc']) {
      cases.push([
        `orders page ${f0(deep)}, sort=${sort},${dir}`,
        `/api/v1/orders?page=${deep}&sort=${sort},${dir}`,
        100,
      ]);
    }
  }
  cases.push(['orders ?status=PENDING page 5,000', '/api/v1/orders?status=PENDING&page=5000', 100]);
  const last = SCALE_ROWS / 20 - 1;
  cases.push([`users, last page (${f0(last)}), sort=name,asc`, `/api/v1/users?page=${last}&sort=name,asc`, 10]);
  cases.push([`orders, last page (${f0(last)}), default sort`, `/api/v1/orders?page=${last}`, 10]);
  const rows = [['request', 'p50 ms', 'p95 ms', 'target p50', 'met']];
  let missed = 0;
  const record = (name: string, r: { p50: number; p95: number }, target: number) => {
    const met = r.p50 <= target;
    if (!met) missed++;
    rows.push([name, f2(r.p50), f2(r.p95), `≤ ${target} ms`, met ? 'yes' : '**no**']);
    console.log(rows.at(-1)?.join('  '));
  };
  const nextLinks: [string, string][] = [];
  for (const [name, path, target] of cases) {
    const r = await latency(pg.port, path);
    record(name, r, target);
    const next = /<https?:\/\/[^/]+([^>]*)>; rel="next"/.exec(r.link)?.[1];
    if (next !== undefined && name.includes(`page ${f0(deep)}`)) nextLinks.push([name, next]);
  }
  for (const [name, next] of nextLinks) record(`rel="next" from ${name}`, await latency(pg.port, next), 10);
  console.log(`\n${table(rows)}\n\n${missed === 0 ? 'every target met' : `${missed} target(s) missed`}`);
  await stopServer(pg);
}
