// No log line of the service process carries a credential that a client put in a URL
// (docs/operations.md#logs): a query or fragment parameter named like one is written as
// `[redacted]`, whatever the path, the answer or the line (the access line, an error's).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runServer, type ServerProcess } from '../support/process.js';
import { engine } from '../support/test-app.js';
import { ADMIN } from '../support/tokens.js';
import { until } from '../support/until.js';

/** A request sent as written, byte for byte (a fragment too, which fetch would leave out). */
function rawGet(url: string, target: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () =>
      socket.write(`GET ${target} HTTP/1.1\r\nHost: ${hostname}\r\nConnection: close\r\n\r\n`),
    );
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe.runIf(engine === 'pglite')('credentials in URLs, in the log', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await runServer({ DATABASE_URL: 'memory://', LOG_LEVEL: 'debug' }).ready;
  }, 60_000);
  afterAll(async () => {
    await server.stop();
  });

  it('logs the request of a URL with ?token=secret123 (and its kin) without the secret', async () => {
    const targets = [
      '/api/public/password-reset?token=secret123',
      '/api/public/reset-password?token=secret123',
      '/api/v1/users?page=0&access_token=secret123',
      '/api/v1/users/1?API_KEY=secret123&size=5',
      '/api/v1/users/abc?clientSecret=secret123',
      '/api/v1/users/1?password=secret123&code=secret123&X-Amz-Signature=secret123',
      '/api/v1/users/1?%74oken=secret123',
      '/api/%zz?token=secret123',
      '/api/public/health/live?token=secret123',
      '/api/public/password-reset#token=secret123',
    ];
    const statuses: string[] = [];
    for (const target of targets) statuses.push((await rawGet(server.url, target)).split('\r\n', 1)[0] ?? '');
    const withAuth = await fetch(`${server.url}/api/v1/users/999999?token=secret123`, {
      headers: { authorization: ADMIN },
    });
    // One access line a request but the malformed one, which Fastify answers before routing.
    await until(
      'the access lines',
      () => server.logs.filter((l) => l.msg === 'request completed').length >= targets.length,
    );

    const lines = server.logs.map((l) => JSON.stringify(l));
    expect(statuses.every((s) => s.startsWith('HTTP/1.1 '))).toBe(true);
    expect(withAuth.status).toBe(404);
    expect(lines.filter((l) => l.includes('secret123'))).toEqual([]);
    expect(lines.filter((l) => l.includes('[redacted]')).length).toBeGreaterThanOrEqual(targets.length);
    expect(lines.some((l) => l.includes('/api/v1/users?page=0&access_token=[redacted]'))).toBe(true);
    expect(lines.some((l) => l.includes('/api/v1/users/1?API_KEY=[redacted]&size=5'))).toBe(true);
  });
});
