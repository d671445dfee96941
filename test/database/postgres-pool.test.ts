// The PostgreSQL pool under continuous load (issue: performance under sustained load).
//
// postgres.js 3.4 with `max` > 1 decays under continuous load: its queue of busy connections
// keeps a hole per query until it drains, which never happens while queries keep arriving,
// and every busy → open move is an indexOf over that array. The work per query grows with the
// number of queries served. This test counts that work instead of timing it: it wraps
// Array.prototype.indexOf and sums the length of every array searched, batch after batch of
// overlapping queries. Through our pool the sum per query stays flat; through a bare
// postgres.js client with `max: 4` (the decaying setup, run as a control so the test is known
// to be able to fail) it grows with every batch.
import { connect, createServer, type Socket } from 'node:net';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { Fifo } from '../../src/db/fifo.js';
import { PostgresPool } from '../../src/db/postgres-pool.js';
import { closeFront, listening, upstreamFor } from '../support/tcp-front.js';
import { engine, testPostgres } from '../support/test-app.js';
import { until } from '../support/until.js';

// The pool itself, on a direct connection (its named prepared statements need one).
const url = testPostgres.directUrl;
const BATCHES = 6;
const PER_BATCH = 3000;
const CONCURRENCY = 64;

/** Runs `query` PER_BATCH times per batch, CONCURRENCY at once without pause between batches. */
async function indexOfWorkPerQuery(query: (i: number) => Promise<unknown>): Promise<number[]> {
  const original = Array.prototype.indexOf;
  let scanned = 0;
  const perBatch: number[] = [];
  Array.prototype.indexOf = function (this: unknown[], ...args: Parameters<typeof original>) {
    scanned += this.length;
    return original.apply(this, args);
  } as typeof original;
  try {
    let next = 0;
    let done = 0;
    // One continuous stream of queries: a new one starts as soon as one ends, so the pool
    // never drains between batches, as under real load.
    await new Promise<void>((resolve, reject) => {
      let batchStart = 0;
      const launch = (): void => {
        if (next >= BATCHES * PER_BATCH) return;
        const i = next++;
        query(i).then(() => {
          done++;
          if (done % PER_BATCH === 0) {
            perBatch.push((scanned - batchStart) / PER_BATCH);
            batchStart = scanned;
          }
          if (done === BATCHES * PER_BATCH) resolve();
          else launch();
        }, reject);
      };
      for (let c = 0; c < CONCURRENCY; c++) launch();
    });
  } finally {
    Array.prototype.indexOf = original;
  }
  return perBatch;
}

describe.runIf(engine === 'postgres' && url !== undefined)('the PostgreSQL pool under continuous load', () => {
  it('does the same work per query however many queries it has served', async () => {
    const pool = new PostgresPool(url!, 4, { onnotice: () => {} });
    try {
      const work = await indexOfWorkPerQuery((i) => pool.query('select $1::int as n', [i]));
      expect(work).toHaveLength(BATCHES);
      // Flat: the last batch costs no more than the first (plus a little slack).
      expect(work.at(-1)!).toBeLessThanOrEqual(work[0]! * 1.2 + 5);
    } finally {
      await pool.end();
    }
  });

  it('control: a bare postgres.js client with max: 4 does more work per query with every batch', async () => {
    const sql = postgres(url!, { max: 4, prepare: true, onnotice: () => {} });
    try {
      const work = await indexOfWorkPerQuery((i) => sql.unsafe('select $1::int as n', [i], { prepare: true }));
      // If this starts failing, postgres.js fixed its queue: the pool may no longer be needed.
      expect(work.at(-1)!).toBeGreaterThan(work[0]! * 2);
    } finally {
      await sql.end();
    }
  });

  it('gives every connection its own client with max: 1, packs queries into few pipelines, and spills when one is full', async () => {
    const pool = new PostgresPool(url!, 3, { onnotice: () => {} }, { pipelineDepth: 4 });
    try {
      await until('three open connections', () => pool.connections().every((c) => c.state === 'open'), 5000);
      const pids = (n: number) =>
        Promise.all(
          Array.from({ length: n }, () =>
            pool.query('select pg_backend_pid() as pid', []).then((rows) => rows[0]!.pid as number),
          ),
        );
      expect(new Set(await pids(4)).size).toBe(1);
      expect(new Set(await pids(12)).size).toBe(3);
    } finally {
      await pool.end();
    }
  });

  it('sends a spread statement to the least loaded connection, never into the pipeline of the reads in flight', async () => {
    const pool = new PostgresPool(url!, 3, { onnotice: () => {} }, { pipelineDepth: 4 });
    await until('three open connections', () => pool.connections().every((c) => c.state === 'open'), 5000);
    const pid = (options?: { spread: boolean }) =>
      pool.query('select pg_backend_pid() as pid', [], options).then((rows) => rows[0]!.pid as number);
    try {
      // Three reads share the first connection's pipeline; two spread statements sent meanwhile
      // each get an idle connection of their own.
      const [reads, first, second] = await Promise.all([
        Promise.all([pid(), pid(), pid()]),
        pid({ spread: true }),
        pid({ spread: true }),
      ]);
      expect(new Set(reads).size).toBe(1);
      expect(new Set([reads[0], first, second]).size).toBe(3);
      // Alone, a spread statement takes the first idle connection: where the reads go too.
      expect(await pid({ spread: true })).toBe(reads[0]);
    } finally {
      await pool.end();
    }
  });

  it('reserves a connection for a transaction under continuous plain load, and queues transactions beyond the pool', async () => {
    const pool = new PostgresPool(url!, 2, { onnotice: () => {} });
    let stop = false;
    let plain = 0;
    const loops = Array.from({ length: 16 }, async () => {
      while (!stop) {
        await pool.query('select 1', []);
        plain++;
      }
    });
    try {
      const first = await pool.reserve();
      const second = await pool.reserve();
      // Both connections are held (each reservation waited for its connection's statements in
      // flight): no plain query is answered until one is released, and a third transaction waits
      // for a release, in order.
      const held = plain;
      let thirdGot = false;
      const third = pool.reserve().then((r) => ((thirdGot = true), r));
      await first.run('select pg_sleep(0.1)', []);
      expect(thirdGot).toBe(false);
      expect(plain).toBe(held);
      first.release();
      const r3 = await third;
      expect(thirdGot).toBe(true);
      const pidOf = async (r: Awaited<typeof third>) => (await r.run('select pg_backend_pid() as pid', []))[0]!.pid;
      expect(await pidOf(r3)).not.toBe(await pidOf(second));
      second.release();
      r3.release();
      // The plain queries that waited while both connections were held are answered once one is
      // released, and the loops go on (none failed: a failure would have rejected Promise.all).
      const atRelease = plain;
      await until('plain queries after the release', () => plain > atRelease + 100, 5000);
    } finally {
      stop = true;
      await Promise.all(loops);
      await pool.end();
    }
  });
});

/** Unhandled rejections seen while `work` runs (Node reports one a turn after it is made). */
async function unhandledRejectionsDuring(work: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown): void => void seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    await work();
    await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    process.off('unhandledRejection', listener);
  }
  return seen;
}

/**
 * A pool of one connection on sockets the test holds (the pool's `dial`), to drop one itself as
 * a network failure the kernel reports: `sockets`, oldest first.
 */
function poolOnOwnSockets(): { pool: PostgresPool; sockets: Socket[] } {
  const sockets: Socket[] = [];
  const pool = new PostgresPool(
    url!,
    1,
    { onnotice: () => {}, connect_timeout: 3 },
    {
      dial: ({ host, port }) =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect(port, host);
          socket.once('connect', () => {
            sockets.push(socket);
            resolve(socket);
          });
          socket.once('error', reject);
        }),
    },
  );
  return { pool, sockets };
}

const within = <T>(promise: Promise<T>, ms = 4000): Promise<T | string> =>
  Promise.race([promise, new Promise<string>((resolve) => setTimeout(resolve, ms, `no answer in ${ms} ms`))]);

/**
 * A TCP forwarder on loopback in front of the suite's PostgreSQL. `drop()` ends the server side of
 * every connection it holds and says nothing to the client: each learns it only when it next
 * writes, by a reset (`reset()` counts them). Connections made after go through untouched.
 */
async function silentlyDroppingFront(): Promise<{
  url: string;
  drop: () => void;
  reset: () => number;
  close: () => void;
}> {
  const target = new URL(url!);
  const pairs = new Set<{ client: Socket; upstream: Socket; dropped: boolean }>();
  let reset = 0;
  const server = createServer((client) => {
    const pair = { client, upstream: connect(Number(target.port), target.hostname), dropped: false };
    pairs.add(pair);
    const { upstream } = pair;
    for (const socket of [client, upstream]) socket.on('error', () => {});
    upstream.pipe(client, { end: false });
    upstream.on('close', () => {
      if (!pair.dropped) client.destroy();
    });
    client.on('close', () => {
      pairs.delete(pair);
      upstream.destroy();
    });
    client.on('data', (chunk: Buffer) => {
      if (!pair.dropped) return void upstream.write(chunk);
      reset++;
      client.resetAndDestroy();
    });
  });
  return {
    url: await listening(server, target),
    drop: () => {
      for (const pair of pairs) {
        pair.dropped = true;
        pair.upstream.destroy();
      }
    },
    reset: () => reset,
    close: () => {
      for (const { client } of pairs) client.destroy();
      server.close();
    },
  };
}

// The pool owns each connection's life (docs/architecture.md, "How a connection lives and dies"):
// a connection is a postgres.js client of its own, thrown away whole when its socket closes, so
// nothing of it reaches the next one. postgres.js 3.4.9 reconnecting a client by itself has lost
// statements that way: a write still buffered at the close was sent ahead of the next
// connection's startup message (every statement then waited for connect_timeout, for good); a
// statement sent between a socket's error and its close never settled, and the next connection
// answered it with the next statement's answer.
describe.runIf(engine === 'postgres' && url !== undefined)('a connection that dies', () => {
  it('answers a repeatable statement sent at the drop on a new connection, at once, and every one after', async () => {
    const { pool, sockets } = poolOnOwnSockets();
    const seen = await unhandledRejectionsDuring(async () => {
      try {
        expect(await pool.query('select 1 as one', [])).toEqual([{ one: 1 }]);
        // In a check phase, the socket is destroyed and a statement written: its bytes wait for the
        // next setImmediate, and the socket's close comes first (the close phase follows the check).
        const started = performance.now();
        const atDrop = await new Promise<unknown>((resolve) =>
          setImmediate(() => {
            sockets.at(-1)!.destroy();
            pool.query('select 2 as two', [], { repeatable: true }).then(resolve, resolve);
          }),
        );
        expect(atDrop).toEqual([{ two: 2 }]);
        expect(performance.now() - started).toBeLessThan(2000);
        expect(await within(pool.query('select 3 as three', []))).toEqual([{ three: 3 }]);
        expect(sockets.length).toBe(2);
      } finally {
        await pool.end({ timeout: 0 });
      }
    });
    expect(seen).toEqual([]);
  });

  it("settles a statement sent between the socket's error and its close, and every later one gets its own answer", async () => {
    const { pool, sockets } = poolOnOwnSockets();
    try {
      expect(await pool.query('select 1 as one', [])).toEqual([{ one: 1 }]);
      const socket = sockets.at(-1)!;
      // One statement in flight, then the socket reset; after its error and before its close, two
      // more: one declared repeatable, one not.
      const inFlight = pool.query('select pg_sleep(0.2), 2 as two', [], { repeatable: true });
      const afterError = new Promise<{ repeatable: Promise<unknown>; once: Promise<unknown> }>((resolve) =>
        socket.once('error', () =>
          resolve({
            repeatable: pool.query('select 3 as three', [], { repeatable: true }),
            once: pool.query('select 4 as four', []).then(
              () => 'answered',
              (error: unknown) => error,
            ),
          }),
        ),
      );
      socket.destroy(Object.assign(new Error('reset by the test'), { code: 'ECONNRESET' }));
      const sent = await afterError;
      // The repeatable ones are sent once more, on a new connection; the other settles, refused.
      expect(await within(inFlight)).toEqual([{ pg_sleep: '', two: 2 }]);
      expect(await within(sent.repeatable)).toEqual([{ three: 3 }]);
      expect(await within(sent.once)).toMatchObject({ code: 'CONNECTION_CLOSED' });
      expect(sockets.length).toBe(2);
      const later = await within(Promise.all([5, 6, 7].map((n) => pool.query(`select ${n} as n`, []))));
      expect(later).toEqual([[{ n: 5 }], [{ n: 6 }], [{ n: 7 }]]);
    } finally {
      await pool.end({ timeout: 0 });
    }
  });

  // A statement is sent again only when its caller declared it repeatable, never for its text: a
  // select can write (`select * from webhook_claim(…)` takes a lease).
  it('never sends a statement that was not declared repeatable a second time, though it is a select', async () => {
    const { pool, sockets } = poolOnOwnSockets();
    const sequence = `resource_api_pool_test_${process.pid}`;
    try {
      await pool.query(`create sequence ${sequence}`, []);
      const inFlight = pool.query(`select nextval('${sequence}') as n, pg_sleep(0.3)`, []).then(
        () => 'answered',
        (error: unknown) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      sockets.at(-1)!.destroy(Object.assign(new Error('reset by the test'), { code: 'ECONNRESET' }));
      expect(await within(inFlight)).toMatchObject({ code: 'ECONNRESET' });
      // It ran once on the server (the reset came after it was sent), and only once.
      await new Promise((resolve) => setTimeout(resolve, 400));
      const [row] = await pool.query(`select last_value::int as last_value, is_called from ${sequence}`, [], {
        repeatable: true,
      });
      expect(row).toEqual({ last_value: 1, is_called: true });
    } finally {
      await pool.query(`drop sequence if exists ${sequence}`, []).catch(() => {});
      await pool.end({ timeout: 0 });
    }
  });

  it('rejects the statements of a transaction whose connection dies, and serves the next one', async () => {
    const { pool, sockets } = poolOnOwnSockets();
    try {
      const reservation = await pool.reserve();
      await reservation.run('begin', []);
      const waiting = reservation.run('select pg_sleep(0.3)', []).then(
        () => 'answered',
        (error: unknown) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      sockets.at(-1)!.destroy();
      expect(await within(waiting)).toMatchObject({ code: expect.stringMatching(/^(CONNECTION_CLOSED|ECONNRESET)$/) });
      expect(reservation.isLost()).toBe(true);
      await expect(reservation.run('select 1', [])).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
      reservation.release();
      expect(await within(pool.query('select 2 as two', [], { repeatable: true }))).toEqual([{ two: 2 }]);
    } finally {
      await pool.end({ timeout: 0 });
    }
  });

  // A server that restarts, or a network that drops, can leave every connection of the pool dead
  // with nothing said: the pool learns it one connection at a time, as it writes to each. A read
  // sent then must not take the second dead connection's reset for its answer.
  it('answers a repeatable statement through every connection that died unannounced', async () => {
    const front = await silentlyDroppingFront();
    const pool = new PostgresPool(front.url, 3, { onnotice: () => {}, connect_timeout: 3 });
    try {
      await until('three connections', () => pool.connections().every(({ state }) => state === 'open'), 3000);
      front.drop();
      expect(pool.connections().map(({ state }) => state)).toEqual(['open', 'open', 'open']);
      expect(await within(pool.query('select 1 as one', [], { repeatable: true }))).toEqual([{ one: 1 }]);
      expect(front.reset()).toBe(3);
    } finally {
      await pool.end({ timeout: 0 });
      front.close();
    }
  });
});

/**
 * A TCP server on loopback in front of the suite's PostgreSQL: it accepts each connection and
 * closes it at once (as a proxy or a load balancer with no server behind it) until `pass` is
 * set, and from then on forwards it. `accepted` counts the connections it took.
 */
async function frontOfPostgres(): Promise<{
  url: string;
  accepted: () => number;
  pass: () => void;
  close: () => void;
}> {
  const target = new URL(url!);
  let accepted = 0;
  let passing = false;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    accepted++;
    if (!passing) {
      client.on('error', () => {});
      return void client.end();
    }
    client.pipe(upstreamFor(client, target, sockets)).pipe(client);
  });
  return {
    url: await listening(server, target),
    accepted: () => accepted,
    pass: () => (passing = true),
    close: () => void closeFront(server, sockets),
  };
}

/**
 * How many rounds of the hosts one connection makes within `ms` of its pool's start, at the
 * fastest and the slowest the pace allows (reconnect-delay.ts): the first at once, the second 50
 * ms on (a statement waits for it), then after `retries` failed ones, between half and all of
 * min(50 ms × 2^retries, 1 s).
 */
function dialsWithin(ms: number): { fewest: number; most: number } {
  const count = (share: number) => {
    let at = 50;
    let dials = 2;
    for (let retries = 2; ; retries++) {
      at += share * Math.min(50 * 2 ** retries, 1000);
      if (at > ms) return dials;
      dials++;
    }
  };
  return { fewest: count(1), most: count(0.5) };
}

/** Resolves once `count()` has not changed for `ms` (no dial in flight or about to answer). */
async function quiet(count: () => number, ms: number): Promise<void> {
  for (let last = -1; last !== count();) {
    last = count();
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}

// postgres.js 3.4.9 dials again at once, and forever, when a connection closes cleanly before it
// is ready (thousands of connections a second; a standby that is not the primary, behind a URL of
// several hosts, is dropped the same way). The pool paces its own rounds of the hosts.
describe.runIf(engine === 'postgres' && url !== undefined)('a server that accepts connections and closes them', () => {
  it('refuses statements at once with a connection error, dials at most about once a second, and serves the first one after it can', async () => {
    const front = await frontOfPostgres();
    const createdAt = performance.now();
    const pool = new PostgresPool(front.url, 1, { onnotice: () => {}, connect_timeout: 2 });
    try {
      const seen = await unhandledRejectionsDuring(async () => {
        const started = performance.now();
        const first = await within(
          pool.query('select 1 as one', []).then(
            () => 'answered',
            (e: unknown) => e,
          ),
        );
        expect(first).toMatchObject({ code: expect.stringMatching(/^(CONNECTION_CLOSED|CONNECT_TIMEOUT)$/) });
        expect(performance.now() - started).toBeLessThan(2500);
        // Three seconds of a server that takes and drops every connection: the pool's pace (50 ms
        // doubling to a second, each between half and all of it), not a spin, nor a second at once.
        await new Promise((resolve) => setTimeout(resolve, 3000));
        const { fewest, most } = dialsWithin(performance.now() - createdAt);
        expect(front.accepted()).toBeGreaterThanOrEqual(fewest - 1);
        expect(front.accepted()).toBeLessThanOrEqual(most);
        // Each failed opening is counted (db_pool_connection_errors_total), and none is open.
        expect(pool.metrics()).toMatchObject({ open: 0, connectionErrors: expect.any(Number) });
        expect(pool.metrics().connectionErrors).toBeGreaterThanOrEqual(fewest - 1);
        // Meanwhile a statement is refused at once: no connection can be made.
        const refusedAt = performance.now();
        await expect(pool.query('select 2 as two', [])).rejects.toBeTruthy();
        expect(performance.now() - refusedAt).toBeLessThan(500);
        // The server returns while the connection waits out its backoff (up to a second): the
        // next statement does not wait for it, nor is it refused; it opens a connection now.
        await quiet(front.accepted, 150);
        front.pass();
        expect(await within(pool.query('select 3 as three', []), 500)).toEqual([{ three: 3 }]);
        const reservation = await pool.reserve();
        expect(await reservation.run('select 4 as four', [])).toEqual([{ four: 4 }]);
        reservation.release();
      });
      expect(seen).toEqual([]);
    } finally {
      await pool.end({ timeout: 0 });
      front.close();
    }
  });

  it('refuses a transaction that cannot get a connection, and gives the next connection to the next one', async () => {
    const front = await frontOfPostgres();
    const pool = new PostgresPool(front.url, 1, { onnotice: () => {}, connect_timeout: 1 });
    try {
      await expect(pool.reserve()).rejects.toMatchObject({
        code: expect.stringMatching(/^(CONNECTION_CLOSED|CONNECT_TIMEOUT)$/),
      });
      front.pass();
      await until('a connection', () => pool.connections()[0]!.state === 'open', 3000);
      const reservation = await pool.reserve();
      expect(await reservation.run('select 4 as four', [])).toEqual([{ four: 4 }]);
      reservation.release();
      expect(await within(pool.query('select 5 as five', []))).toEqual([{ five: 5 }]);
    } finally {
      await pool.end({ timeout: 0 });
      front.close();
    }
  });
});

/**
 * A TCP forwarder on loopback in front of the suite's PostgreSQL that answers a connection's first
 * statement whose text holds `marker` itself, with `answer` (backend messages), and does not send
 * it on; `close` then ends that connection (as after a FATAL). Every later statement, and every
 * connection after the first such answer, goes through untouched. `sent` is every byte clients sent.
 */
async function interceptingFront(
  marker: string,
  answer: Buffer,
  { close }: { close: boolean },
): Promise<{ url: string; intercepted: () => number; sent: () => string; close: () => void }> {
  const target = new URL(url!);
  let intercepted = 0;
  let sent = '';
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = upstreamFor(client, target, sockets);
    upstream.pipe(client);
    client.on('data', (chunk: Buffer) => {
      sent += chunk.toString('latin1');
      if (intercepted === 0 && chunk.includes(marker)) {
        intercepted++;
        client.write(answer);
        if (close) client.end();
        return;
      }
      upstream.write(chunk);
    });
  });
  return {
    url: await listening(server, target),
    intercepted: () => intercepted,
    sent: () => sent,
    close: () => void closeFront(server, sockets),
  };
}

/** `first` (a URL) with a second host after its own, as libpq writes several (URL's host setter drops a comma). */
function twoHosts(first: string, second: string): string {
  const { host } = new URL(first);
  return first.replace(`@${host}/`, `@${host},${second}/`);
}

/** A backend ErrorResponse ('E') of the given severity, SQLSTATE and message. */
function errorResponse(severity: string, code: string, message: string): Buffer {
  const fields = Buffer.from(`S${severity}\0V${severity}\0C${code}\0M${message}\0\0`);
  const head = Buffer.alloc(5);
  head.write('E');
  head.writeUInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/** ReadyForQuery ('Z'), idle. */
const readyForQuery = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);

// postgres.js 3.4.9 sends statements of its own on a new connection (the array types; with
// several hosts, the session's state) and drops their promises: when one fails (PgBouncer answers
// FATAL "server conn crashed?" when the server connection dies under it), the rejection is
// unhandled, and Node's default for that ends the process. The pool's clients send none
// (`fetch_types: false`, no target_session_attrs); the pool opens each connection with a statement
// of its own (SESSION_STATE), whose failure it handles.
describe.runIf(engine === 'postgres' && url !== undefined)('a connection whose first statement fails', () => {
  it("sends no statement of the driver's own: only the pool's and the caller's", async () => {
    const front = await interceptingFront('never intercepted', Buffer.alloc(0), { close: false });
    const pool = new PostgresPool(twoHosts(front.url, new URL(front.url).host), 1, { onnotice: () => {} });
    try {
      expect(await pool.query('select $1::int as n', [1])).toEqual([{ n: 1 }]);
      expect(front.sent()).toContain('pg_is_in_recovery');
      expect(new URL(front.url).host).not.toBe(new URL(url!).host);
      expect(front.sent()).not.toContain('typcategory');
      expect(front.sent()).not.toContain('show transaction_read_only');
    } finally {
      await pool.end({ timeout: 0 });
      front.close();
    }
  });

  /** A pool behind a front that answers its opener with `answer`: it answers on a later connection. */
  async function answersAfter(answer: Buffer, close: boolean): Promise<void> {
    const front = await interceptingFront('pg_is_in_recovery', answer, { close });
    const pool = new PostgresPool(front.url, 1, { onnotice: () => {}, connect_timeout: 3 });
    try {
      const seen = await unhandledRejectionsDuring(async () => {
        await until(
          'an answer on the next connection',
          () =>
            pool.query('select 1 as one', []).then(
              () => true,
              () => false,
            ),
          3000,
        );
        expect(front.intercepted()).toBe(1);
      });
      expect(seen).toEqual([]);
    } finally {
      await pool.end({ timeout: 0 });
      front.close();
    }
  }

  it('answers the statement on the next connection after a FATAL there, with no unhandled rejection', async () => {
    await answersAfter(errorResponse('FATAL', '08P01', 'server conn crashed?'), true);
  });

  it('goes on after an ERROR there, with no unhandled rejection', async () => {
    await answersAfter(
      Buffer.concat([errorResponse('ERROR', '57014', 'canceling statement due to statement timeout'), readyForQuery]),
      false,
    );
  });

  it("finds the primary on the next host after a FATAL on the first one's session state", async () => {
    const front = await interceptingFront(
      'pg_is_in_recovery',
      errorResponse('FATAL', '08P01', 'server conn crashed?'),
      {
        close: true,
      },
    );
    // Two hosts: the front (its first connection fails), then the server itself.
    const pool = new PostgresPool(twoHosts(front.url, new URL(url!).host), 1, {
      onnotice: () => {},
      connect_timeout: 3,
    });
    try {
      const seen = await unhandledRejectionsDuring(async () => {
        expect(await within(pool.query('select 1 as one', []))).toEqual([{ one: 1 }]);
        expect(front.intercepted()).toBe(1);
      });
      expect(seen).toEqual([]);
    } finally {
      await pool.end({ timeout: 0 });
      front.close();
    }
  });
});

// docs/operations.md#overload: queue time, not queue length. A statement that found no free
// connection waits at most queueTimeoutMs, and is then refused without being sent.
describe.runIf(engine === 'postgres' && url !== undefined)('waiting for a connection', () => {
  it('refuses a statement that waited longer than the queue time-out, sends the ones served in time, in order', async () => {
    const pool = new PostgresPool(url!, 1, { onnotice: () => {} }, { queueTimeoutMs: 300 });
    try {
      await until('an open connection', () => pool.connections()[0]!.state === 'open', 5000);
      const held = await pool.reserve();
      const started = performance.now();
      const late = pool.query('select 1 as one', []).then(
        () => 'answered',
        (error: unknown) => error,
      );
      await until('a statement waiting', () => pool.metrics().waiting === 1, 250);
      expect(await within(late)).toMatchObject({ code: 'QUEUE_TIMEOUT' });
      expect(pool.metrics()).toMatchObject({
        queueTimeouts: 1,
        waiting: 0,
        open: 1,
      });
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThanOrEqual(290);
      expect(waited).toBeLessThan(1500);
      // Served in time: a statement queued behind the transaction runs once it ends.
      const inTime = pool.query('select 2 as two', []);
      const transaction = pool.reserve();
      held.release();
      expect(await within(inTime)).toEqual([{ two: 2 }]);
      ((await within(transaction)) as Awaited<typeof transaction>).release();
    } finally {
      await pool.end({ timeout: 0 });
    }
  });
});

describe('Fifo', () => {
  it('keeps order and bounded storage over a million operations that never drain it', () => {
    const q = new Fifo<number>();
    let pushed = 0;
    let expected = 0;
    let outOfOrder = 0;
    let maxCapacity = 0;
    for (let i = 0; i < 1_000_000; i++) {
      q.push(pushed++);
      if (i % 2 === 0) q.push(pushed++);
      while (q.length > 10) if (q.shift() !== expected++) outOfOrder++;
      maxCapacity = Math.max(maxCapacity, q.capacity);
    }
    expect(outOfOrder).toBe(0);
    expect(q.length).toBeLessThanOrEqual(10);
    expect(maxCapacity).toBeLessThanOrEqual(24);
  });
});

// docs/architecture.md, "How a connection lives and dies": only a socket's failure and the codes
// that end a session end a connection at once. A live server that refuses one statement as
// read-only (25006: a primary being demoted) has answered the others pipelined with it, or will.
describe.runIf(engine === 'postgres' && url !== undefined)('a statement refused as read-only (25006)', () => {
  it('fails alone: the statements pipelined with it are answered, and its connection retires once they are', async () => {
    const pool = new PostgresPool(url!, 1, { onnotice: () => {} });
    const pid = async () => (await pool.query('select pg_backend_pid() as pid', []))[0]!.pid as number;
    try {
      const before = await pid();
      const ahead = [1, 2].map((n) => pool.query(`select pg_sleep(0.1), ${n} as n`, []));
      const refused = pool.query(`do $$ begin raise sqlstate '25006'; end $$`, []).then(
        () => 'answered',
        (error: unknown) => error,
      );
      const behind = [3, 4].map((n) =>
        pool.query(`select pg_sleep(0.1), ${n} as n`, []).then(
          (rows) => rows,
          (error: unknown) => error,
        ),
      );
      expect(await within(refused)).toMatchObject({ code: '25006' });
      expect(await within(Promise.all(ahead))).toEqual([[{ pg_sleep: '', n: 1 }], [{ pg_sleep: '', n: 2 }]]);
      expect(await within(Promise.all(behind))).toEqual([[{ pg_sleep: '', n: 3 }], [{ pg_sleep: '', n: 4 }]]);
      // Retired once drained: the next statement runs on a new session.
      expect(await within(pid())).not.toBe(before);
    } finally {
      await pool.end({ timeout: 0 });
    }
  });
});

// After an outage every statement waits for a connection; the first one to open must not take
// them all (docs/architecture.md, "Choosing a connection"): a plain statement joins a pipeline
// only while it has room, and a spread one (a write) waits for a connection with nothing in
// flight, so that writes land on several backends.
describe.runIf(engine === 'postgres' && url !== undefined)('statements waiting when connections open', () => {
  it('fills no pipeline past its depth and spreads the writes over the connections', async () => {
    const pool = new PostgresPool(url!, 3, { onnotice: () => {} }, { pipelineDepth: 4 });
    let deepest = 0;
    const sampler = setInterval(() => {
      for (const { inflight } of pool.connections()) deepest = Math.max(deepest, inflight);
    }, 2);
    try {
      const pid = (options?: { spread: boolean }) =>
        pool.query('select pg_backend_pid() as pid, pg_sleep(0.2)', [], options).then((rows) => rows[0]!.pid as number);
      // Sent before any connection is open: they all wait.
      const writes = [pid({ spread: true }), pid({ spread: true }), pid({ spread: true })];
      const reads = Array.from({ length: 12 }, () => pid());
      const [writePids, readPids] = await within(Promise.all([Promise.all(writes), Promise.all(reads)]), 8000).then(
        (all) => all as [number[], number[]],
      );
      expect(new Set(writePids).size).toBe(3);
      expect(new Set(readPids).size).toBeGreaterThan(1);
      expect(deepest).toBeLessThanOrEqual(4);
    } finally {
      clearInterval(sampler);
      await pool.end({ timeout: 0 });
    }
  });
});
