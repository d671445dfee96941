// A webhook receiver's host is resolved by DNS without libuv's thread pool (src/webhooks/
// address-guard.ts, dnsResolver): the pool's four threads hash passwords (argon2), and
// getaddrinfo(3) on a resolver that does not answer held one each, so eight webhook URLs on a
// silent DNS server held every login and user creation behind them. Here the service's own
// resolver asks a DNS server on loopback that reads every query and answers none.
import { createSocket } from 'node:dgram';
import { afterAll, describe, expect, it } from 'vitest';
import { dnsResolver } from '../../src/webhooks/address-guard.js';
import { aUserRequest, asAdmin } from '../support/factories.js';
import { buildTestApp } from '../support/test-app.js';

const silent = createSocket('udp4');
let queries = 0;
silent.on('message', () => queries++);
await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', resolve));
afterAll(() => silent.close());
const server = `127.0.0.1:${silent.address().port}`;

const { app } = await buildTestApp(
  { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' },
  { resolveHost: dnsResolver([server], { timeoutMs: 1500, tries: 1 }) },
);
const api = asAdmin(app);

describe('webhook hosts resolved while the DNS server does not answer', () => {
  it('creates users (argon2 on the thread pool) while eight subscriptions wait for their hosts', async () => {
    const finished: string[] = [];
    const subscriptions = Array.from({ length: 8 }, (_, i) =>
      api({
        method: 'POST',
        url: '/api/v1/webhook-subscriptions',
        payload: { url: `https://hook-${i}.example.com/in`, events: ['*'] },
      }).then((answer) => {
        finished.push('subscription');
        return answer;
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const users = Array.from({ length: 4 }, () =>
      api({ method: 'POST', url: '/api/v1/users', payload: aUserRequest() }).then((answer) => {
        finished.push('user');
        return answer;
      }),
    );
    for (const answer of await Promise.all(users)) expect(answer.statusCode, answer.body).toBe(201);
    // Every user was created while every subscription still waited for DNS.
    expect(finished).toEqual(['user', 'user', 'user', 'user']);
    expect(queries).toBeGreaterThanOrEqual(8);
    for (const answer of await Promise.all(subscriptions)) {
      expect(answer.statusCode, answer.body).toBe(400);
      expect(answer.json().fieldErrors).toEqual([
        expect.objectContaining({ field: 'url', message: 'must name a host that resolves' }),
      ]);
    }
  });

  it('reads localhost as the loopback addresses without asking DNS', async () => {
    const before = queries;
    expect(await dnsResolver([server])('localhost')).toEqual(['127.0.0.1', '::1']);
    expect(await dnsResolver([server])('api.localhost.')).toEqual(['127.0.0.1', '::1']);
    expect(queries).toBe(before);
  });
});
