// The leanest refusal (bench --overload): a bare node:http server answering every request 503
// with a short body: the floor a refusal by the service is compared with (on the server core),
// and the generator's own floor (on the load core). PORT: where it listens.
import { createServer } from 'node:http';

const body = '{"status":503}';
const server = createServer((_req, res) => {
  res.writeHead(503, { 'content-type': 'application/json', 'content-length': body.length, 'retry-after': '1' });
  res.end(body);
});
// With the service's listen backlog (src/server.ts), so that the reach check's floor is of the
// same accept queue.
server.listen({ port: Number(process.env.PORT), host: '127.0.0.1', backlog: 65_535 }, () => console.log('ready'));
process.on('SIGTERM', () => process.exit(0));
