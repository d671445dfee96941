// The benchmark's anchors: the least a Node server can do for the same answer.
//   anchors.ts http <port>             a fixed JSON user from bare node:http
//   anchors.ts pg <port> <url> [max]   one user by primary key through postgres.js, max: 1, in its
//                                      leanest form: sql.unsafe(text, [id], { prepare: true }) with
//                                      fetch_types: false (no tagged-template parse per call, no type
//                                      query at connect), prepared and pipelined; a larger max is the
//                                      shape that decays (bench --soak --soak-decaying)
//   anchors.ts pglite <port> <seed>    one user by primary key through PGlite in memory (its
//                                      query()), seeded with <seed> users by plain SQL
//   anchors.ts pglite-named <port> <seed>
//                                      the same through the service's own PGlite statement path
//                                      (a named statement, one exchange per query: pglite-statements.ts)
//   anchors.ts express <port> <url>    one user by primary key the common way: Express 5 and
//                                      node-postgres (pg.Pool of 10, a named prepared statement),
//                                      res.json(): what a typical Node API does for the same answer
//   anchors.ts fastify <port>          the liveness probe's answer from a bare Fastify route, with the
//                                      six headers every answer carries (request id, nosniff, Vary, two
//                                      CORS headers, Cache-Control) and nothing else: the floor of the
//                                      decided stack for that answer
import { createServer, type ServerResponse } from 'node:http';

const [kind, portArg, arg, maxArg] = process.argv.slice(2);
const port = Number(portArg);

interface UserRow {
  id: number | string;
  name: string;
  email: string;
  created_at: Date;
}

function send(res: ServerResponse, r: UserRow | undefined): void {
  if (r === undefined) {
    res.writeHead(404).end();
    return;
  }
  const body = JSON.stringify({
    id: Number(r.id),
    name: r.name,
    email: r.email,
    createdAt: r.created_at.toISOString(),
  });
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const idOf = (url: string) => Number(url.slice(url.lastIndexOf('/') + 1));
const ready = () => {
  console.log('ready');
};

if (kind === 'http') {
  const body = JSON.stringify({
    id: 1,
    name: 'Ada Lovelace',
    email: 'ada@example.com',
    createdAt: '2026-11-21T22:34:23.123Z',
  });
  createServer((_req, res) => {
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }).listen(port, '127.0.0.1', ready);
} else if (kind === 'pg') {
  const { default: postgres } = await import('postgres');
  const sql = postgres(arg ?? '', { max: Number(maxArg ?? 1), prepare: true, fetch_types: false, onnotice: () => {} });
  const text = 'select id, name, email, created_at from users where id = $1';
  createServer((req, res) => {
    sql.unsafe<UserRow[]>(text, [idOf(req.url ?? '')], { prepare: true }).then(
      (rows) => send(res, rows[0]),
      () => res.writeHead(500).end(),
    );
  }).listen(port, '127.0.0.1', ready);
} else if (kind === 'pglite' || kind === 'pglite-named') {
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create();
  await db.exec(`create table users (id bigserial primary key, name text not null, email text not null, created_at timestamptz not null default now());
    insert into users (name, email) select 'Seed ' || i, 'seed' || i || '@example.com' from generate_series(1, ${Number(arg ?? 1000)}) i;`);
  const text = 'select id, name, email, created_at from users where id = $1';
  let query = (id: number) => db.query<UserRow>(text, [id]).then((result) => result.rows[0]);
  if (kind === 'pglite-named') {
    // PGlite is one session: its statements go one at a time (query() locks by itself).
    const { Mutex } = await import('@electric-sql/pglite');
    const { PGliteStatements } = await import('../src/db/pglite-statements.js');
    const statements = new PGliteStatements(db);
    const mutex = new Mutex();
    query = (id) =>
      mutex.runExclusive(() => statements.query(text, [id])).then((result) => result.rows[0] as UserRow | undefined);
  }
  createServer((req, res) => {
    query(idOf(req.url ?? '')).then(
      (row) => send(res, row),
      () => res.writeHead(500).end(),
    );
  }).listen(port, '127.0.0.1', ready);
} else if (kind === 'express') {
  const { default: express } = await import('express');
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: arg ?? '', max: 10 });
  const app = express();
  app.get('/api/v1/users/:id', (req, res) => {
    pool
      .query<UserRow>({
        name: 'user-by-id',
        text: 'select id, name, email, created_at from users where id = $1',
        values: [Number(req.params.id)],
      })
      .then(
        ({ rows: [r] }) => {
          if (r === undefined) res.status(404).end();
          else res.json({ id: Number(r.id), name: r.name, email: r.email, createdAt: r.created_at.toISOString() });
        },
        () => res.status(500).end(),
      );
  });
  app.listen(port, '127.0.0.1', ready);
} else if (kind === 'fastify') {
  const { randomUUID } = await import('node:crypto');
  const { default: Fastify } = await import('fastify');
  const { EXPOSED_HEADERS } = await import('../src/http/cors.js');
  const app = Fastify({ logger: false });
  const exposed = EXPOSED_HEADERS.join(', '); // as the service's CORS policy lists them
  const schema = {
    response: {
      200: { type: 'object', properties: { status: { type: 'string', const: 'UP' } }, required: ['status'] },
    },
  };
  app.get('/api/public/health/live', { schema }, (req, reply) => {
    reply
      .header('x-request-id', randomUUID())
      .header('x-content-type-options', 'nosniff')
      .header('vary', 'Origin')
      .header('access-control-allow-origin', req.headers.origin ?? '*')
      .header('access-control-expose-headers', exposed)
      .header('cache-control', 'no-store')
      .send({ status: 'UP' });
  });
  await app.listen({ port, host: '127.0.0.1' });
  ready();
} else {
  console.error(`unknown anchor ${kind}`);
  process.exit(2);
}
// An orderly exit on SIGTERM, so that `--cpu-prof` (bench --profile) writes its profile.
process.on('SIGTERM', () => process.exit(0));
