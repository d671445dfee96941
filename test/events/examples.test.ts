// The runnable examples do what their headers say: examples/webhook-receiver.ts, started as its
// header shows with a subscription's secret, verifies and prints a real delivery, and refuses
// a request that is not signed with that secret.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { asAdmin } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';
import { until } from '../support/until.js';

const ROOT = join(import.meta.dirname, '..', '..');
const { app } = await buildTestApp({
  WEBHOOK_DISPATCHER: 'true',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_POLL_MS: '50',
});
const api = asAdmin(app);

/** Starts the receiver on a free port; resolves with its URL once it says it listens. */
function startReceiver(secret: string): Promise<{ url: string; process: ChildProcess; lines: string[] }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/webhook-receiver.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', RESOURCE_API_WEBHOOK_SECRET: secret, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the receiver exited with ${String(code)}`)));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      lines.push(...chunk.split('\n').filter((l) => l !== ''));
      const listening = lines.map((l) => /^listening on (\S+)$/.exec(l)).find((m) => m !== null);
      if (listening) resolve({ url: listening[1]!, process: child, lines });
    });
  });
}

describe('examples/webhook-receiver.ts', () => {
  let receiver: ChildProcess | undefined;
  afterAll(() => receiver?.kill());

  it('verifies and prints a delivery, and answers 400 to an unsigned request', async () => {
    const subscription = await api({
      method: 'POST',
      url: '/api/v1/webhook-subscriptions',
      payload: { url: 'http://127.0.0.1:1/', events: ['user.created'] },
    });
    expect(subscription.statusCode, subscription.body).toBe(201);
    const { id, secret } = subscription.json<{ id: number; secret: string }>();
    const started = await startReceiver(secret);
    receiver = started.process;
    expect(
      (await api({ method: 'PATCH', url: `/api/v1/webhook-subscriptions/${id}`, payload: { url: started.url } }))
        .statusCode,
    ).toBe(200);

    const user = await api({
      method: 'POST',
      url: '/api/v1/users',
      payload: { name: 'Receiver Example', email: 'receiver-example@example.com', password: 'correct horse battery' },
    });
    expect(user.statusCode).toBe(201);
    const userId = user.json<{ id: number }>().id;
    await until(
      'the receiver printing the event',
      () => started.lines.some((l) => l.startsWith('user.created')),
      10_000,
    );
    const unsigned = await fetch(started.url, { method: 'POST', body: '{"type":"user.created"}' });

    expect(started.lines.filter((l) => l.startsWith('user.'))).toEqual([
      `user.created users/${userId} ${JSON.stringify(user.json())}`,
    ]);
    expect(unsigned.status).toBe(400);
  });
});
