import http from 'node:http';
import postgres from 'postgres';
import {
  DB_URL,
  DURATION,
  type Measurement,
  POOL,
  PRODUCTS,
  ROUNDS,
  TOKEN,
  USERS,
  call,
  f0,
  f1,
  f2,
  orders,
  script,
  seed,
  service,
  stopServer,
  table,
  wrk,
} from '../lib/common.js';

// ---- webhooks ---------------------------------------------------------------------------------

const WEBHOOK_SECONDS = Number(process.env.BENCH_WEBHOOK_SECONDS ?? 30);

/** A receiver on 127.0.0.1 that answers 204 and notes when each order's event arrived. */
async function webhookReceiver(): Promise<{ port: number; arrivals: Map<string, number>; count: () => number }> {
  const arrivals = new Map<string, number>();
  let count = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      count++;
      const subject = /"subject":"([^"]+)"/.exec(Buffer.concat(chunks).toString())?.[1];
      if (subject !== undefined && !arrivals.has(subject)) arrivals.set(subject, at);
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, arrivals, count: () => count };
}

/** webhook_pending from the service's metrics port. */
async function pendingDeliveries(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port + 1000}/metrics`)).text();
  return Number(/^webhook_pending (\S+)/m.exec(text)?.[1] ?? NaN);
}

interface DeliveryFigures {
  created: number;
  p50: number;
  p99: number;
  max: number;
  deliveredPerSecond: number;
  pending: number[];
}

/**
 * Waits (30 s at most) until every event in `sentAt` (subject → when its write was known to be
 * committed) has arrived, and returns the latencies from then to arrival and the last backlog.
 */
async function deliveryFigures(
  port: number,
  receiver: Awaited<ReturnType<typeof webhookReceiver>>,
  sentAt: Map<string, number>,
  deliveredPerSecond: number,
  pending: number[],
): Promise<DeliveryFigures> {
  for (let i = 0; i < 300 && [...sentAt.keys()].some((k) => !receiver.arrivals.has(k)); i++)
    await new Promise((r) => setTimeout(r, 100));
  pending.push(await pendingDeliveries(port));
  const latencies = [...sentAt]
    .map(([subject, at]) => (receiver.arrivals.get(subject) ?? Infinity) - at)
    .sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { created: sentAt.size, p50: q(0.5), p99: q(0.99), max: latencies.at(-1) ?? NaN, deliveredPerSecond, pending };
}

/**
 * Creates orders at `perSecond` for `seconds` (from this process, on the load core), noting
 * when each answer arrived; returns the latencies to delivery and the delivery rate.
 */
async function pacedOrders(
  port: number,
  receiver: Awaited<ReturnType<typeof webhookReceiver>>,
  perSecond: number,
  seconds: number,
): Promise<DeliveryFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const answered = new Map<string, number>();
  const post = (product: number) =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ productId: product, quantity: 1 });
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/v1/orders',
          agent,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => {
            const at = performance.now();
            if (res.statusCode !== 201) return reject(new Error(`POST /api/v1/orders: ${res.statusCode} ${text}`));
            answered.set(`orders/${(JSON.parse(text) as { id: number }).id}`, at);
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const delivered0 = receiver.count();
  const pending: number[] = [];
  const sampler = setInterval(() => void pendingDeliveries(port).then((n) => pending.push(n)), 5000);
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  let sent = 0;
  while (performance.now() - started < seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * perSecond);
    for (; sent < due; sent++) inFlight.push(post((sent % PRODUCTS) + 1));
    await new Promise((r) => setTimeout(r, 2));
  }
  await Promise.all(inFlight);
  const elapsed = (performance.now() - started) / 1000;
  const deliveredPerSecond = (receiver.count() - delivered0) / elapsed;
  clearInterval(sampler);
  agent.destroy();
  return deliveryFigures(port, receiver, answered, deliveredPerSecond, pending);
}

/**
 * Events written straight into the database at `perSecond` for `seconds`, in batches every
 * 20 ms, each followed by a NOTIFY: what another instance's writes look like to this one. The
 * service only delivers them, so the figure is its dispatcher's, not its POST handler's.
 */
async function sqlEvents(
  port: number,
  receiver: Awaited<ReturnType<typeof webhookReceiver>>,
  perSecond: number,
  seconds: number,
): Promise<DeliveryFigures> {
  const db = postgres(DB_URL, { max: 1, onnotice: () => {} });
  const committed = new Map<string, number>();
  const delivered0 = receiver.count();
  const pending: number[] = [];
  const sampler = setInterval(() => void pendingDeliveries(port).then((n) => pending.push(n)), 5000);
  const started = performance.now();
  let sent = 0;
  let next = 2_000_000_000 + Math.floor(Math.random() * 1_000_000) * 1000;
  while (performance.now() - started < seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * perSecond);
    const count = due - sent;
    if (count > 0) {
      const first = next;
      next += count;
      await db`
        with e as (
          insert into events (id, type, subject, time, data, owner)
          select gen_random_uuid(), 'order.updated', 'orders/' || g, now(), '{"id":' || g || '}', 1
            from generate_series(${first}::bigint, ${first + count - 1}::bigint) g
          returning sequence, type, subject
        )
        insert into webhook_deliveries (subscription_id, event_sequence, subject)
        select s.id, e.sequence, e.subject
          from e join webhook_subscriptions s
            on s.enabled and s.events && array[e.type, split_part(e.type, '.', 1) || '.*', '*']`;
      await db`select pg_notify('resource_api_webhooks', 'bench')`;
      const at = performance.now();
      for (let g = first; g < first + count; g++) committed.set(`orders/${g}`, at);
      sent = due;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const elapsed = (performance.now() - started) / 1000;
  const deliveredPerSecond = (receiver.count() - delivered0) / elapsed;
  clearInterval(sampler);
  await db.end();
  return deliveryFigures(port, receiver, committed, deliveredPerSecond, pending);
}

export async function webhooks(): Promise<void> {
  const receiver = await webhookReceiver();
  const pg = await service('service-pg-webhooks', 18083, {
    DATABASE_URL: DB_URL,
    DATABASE_POOL_SIZE: String(POOL),
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', // the receiver is on 127.0.0.1
  });
  console.log(`seeding ${USERS} users and ${PRODUCTS} products…`);
  await seed(pg.port);
  const subscription = (await call(pg.port, 'POST', '/api/v1/webhook-subscriptions', {
    url: `http://127.0.0.1:${receiver.port}/hook`,
    events: ['order.*'],
    description: 'benchmark receiver',
  })) as { id: number };
  const enable = (enabled: boolean) =>
    call(pg.port, 'PATCH', `/api/v1/webhook-subscriptions/${subscription.id}`, { enabled });

  const rows = [['run', 'orders', 'delivered/s', 'p50 ms', 'p99 ms', 'max ms', 'webhook_pending (every 5 s)']];
  const latencyRun = async (perSecond: number) => {
    const r = await pacedOrders(pg.port, receiver, perSecond, WEBHOOK_SECONDS);
    rows.push([
      `${perSecond} orders/s for ${WEBHOOK_SECONDS} s`,
      f0(r.created),
      f0(r.deliveredPerSecond),
      f1(r.p50),
      f1(r.p99),
      f1(r.max),
      r.pending.map((n) => f0(n)).join(' '),
    ]);
    console.log(rows.at(-1)?.join('  '));
    return r;
  };
  const healthy = await latencyRun(50);
  const mixed = await latencyRun(Number(process.env.BENCH_WEBHOOK_RATE ?? 600));
  const rate = Number(process.env.BENCH_WEBHOOK_RATE ?? 600);
  const busy = await sqlEvents(pg.port, receiver, rate, WEBHOOK_SECONDS);
  rows.push([
    `${rate} events/s written by another writer, ${WEBHOOK_SECONDS} s`,
    f0(busy.created),
    f0(busy.deliveredPerSecond),
    f1(busy.p50),
    f1(busy.p99),
    f1(busy.max),
    busy.pending.map((n) => f0(n)).join(' '),
  ]);
  console.log(rows.at(-1)?.join('  '));

  // POST /api/v1/orders under wrk: the subscription active, or paused (no delivery is queued).
  const vacuum = postgres(DB_URL, { max: 1, onnotice: () => {} });
  await vacuum`vacuum analyze webhook_deliveries`;
  const withOne: Measurement[] = [];
  const without: Measurement[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const active of [true, false]) {
      await enable(active);
      // This process does nothing during the run but receive the deliveries: its CPU is the
      // receiver's, which a real deployment spends on another machine, and this one on the load core.
      const cpu0 = process.cpuUsage();
      const m = await wrk(pg, script(`orders-webhook-${active}`, orders(1)), DURATION);
      const cpu = process.cpuUsage(cpu0);
      // What the run left undelivered: a dispatcher that falls behind looks cheaper in the
      // run's figures, and pays after it (below, until the backlog is gone).
      const left = active ? await pendingDeliveries(pg.port) : 0;
      (active ? withOne : without).push(m);
      console.log(
        `round ${round}/${ROUNDS} POST /api/v1/orders, ${active ? 'one subscription' : 'none'}: ${f0(m.rps)} req/s, ` +
          `p99 ${f1(m.p99)} ms, ${f0(m.serverUs)} µs server + ${f0(m.postgresUs)} µs PostgreSQL ` +
          `+ ${f0((cpu.user + cpu.system) / m.requests)} µs receiver per request, ${f0(left)} left undelivered ` +
          `(${Object.entries(m.postgresByKind)
            .sort((x, y) => y[1] - x[1])
            .map(([k, us]) => `${k} ${f0(us)}`)
            .join(', ')})`,
      );
      // The next round starts with no backlog, and with the dead rows of the last one vacuumed:
      // this machine's PostgreSQL runs with autovacuum off, and without it every round finds
      // more of them in the deliveries' indexes (the poll's scan walks them) than production would.
      for (let i = 0; i < 600 && (await pendingDeliveries(pg.port)) > 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      await vacuum`vacuum analyze webhook_deliveries`;
    }
  }
  await vacuum.end();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const a = median(withOne.map((m) => m.rps));
  const b = median(without.map((m) => m.rps));
  const growth = (busy.pending.at(-2) ?? 0) - (busy.pending[0] ?? 0);
  console.log(
    `(the ${rate} orders/s run creates the orders through this instance on its one core as well: ` +
      `p99 ${f1(mixed.p99)} ms, ${f0(mixed.deliveredPerSecond)} delivered/s; reported, not a target)`,
  );
  const checks = [
    ['delivery latency p50 (50 orders/s)', `${f1(healthy.p50)} ms`, '≤ 50 ms', healthy.p50 <= 50],
    ['delivery latency p99 (50 orders/s)', `${f1(healthy.p99)} ms`, '≤ 1,000 ms', healthy.p99 <= 1000],
    ['delivery latency p99 (events from another writer)', `${f1(busy.p99)} ms`, '≤ 1,000 ms', busy.p99 <= 1000],
    [
      'events delivered per second (from another writer)',
      f0(busy.deliveredPerSecond),
      '≥ 500, backlog not growing',
      busy.deliveredPerSecond >= 500 && growth <= 100,
    ],
    [
      'POST /api/v1/orders, one subscription / none',
      `${f0(a)} / ${f0(b)} req/s = ${f2(a / b)}×`,
      '≥ 0.9×',
      a / b >= 0.9,
    ],
  ] as const;
  console.log(`\nreceiver on 127.0.0.1 (answers 204), pool ${POOL}, Node ${process.version}\n\n${table(rows)}\n`);
  console.log(
    table([['figure', 'measured', 'target', 'met'], ...checks.map(([n, m, t, ok]) => [n, m, t, ok ? 'yes' : 'NO'])]),
  );
  const missed = checks.filter((c) => !c[3]).length;
  console.log(missed === 0 ? '\nevery webhook target met' : `\n${missed} webhook target(s) missed`);
  await stopServer(pg);
}
