// The benchmark's anchors: the least a Node server can do for the same answer.
//   node bench/anchors.js http <port>            a fixed JSON user from node:http
//   node bench/anchors.js pg <port> <url> <pool> one user by primary key through postgres.js
import { createServer } from 'node:http';
import postgres from 'postgres';

const [kind, portArg, url, pool] = process.argv.slice(2);
const port = Number(portArg);

if (kind === 'http') {
  const body = JSON.stringify({ id: 1, name: 'Ada Lovelace', email: 'ada@example.com', createdAt: '2026-11-21T22:34:23.123' });
  createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }).listen(port, '127.0.0.1', () => console.log('ready'));
} else {
  const sql = postgres(url!, { max: Number(pool), prepare: true, onnotice: () => {} });
  createServer((req, res) => {
    const id = Number(req.url!.slice(req.url!.lastIndexOf('/') + 1));
    sql`select id, name, email, created_at from users where id = ${id}`.then(
      (rows) => {
        const r = rows[0]!;
        const body = JSON.stringify({ id: Number(r.id), name: r.name, email: r.email, createdAt: (r.created_at as Date).toISOString().slice(0, 23) });
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      },
      () => {
        res.writeHead(500).end();
      },
    );
  }).listen(port, '127.0.0.1', () => console.log('ready'));
}
