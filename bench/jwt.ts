// npm run bench:jwt — what verifying a bearer token costs per request, with and without the
// verified-token cache, for each algorithm the service accepts.
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { TokenVerifier } from '../src/http/auth/auth.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 20_000);
const none = { secret: undefined, publicKey: undefined, jwksUrl: undefined, issuer: undefined, audience: undefined };
const claims = { scope: 'users:read users:write orders:read' };
const exp = Math.floor(Date.now() / 1000) + 3600;

async function measure(label: string, verifier: TokenVerifier, token: string): Promise<number> {
  for (let i = 0; i < 1000; i++) await verifier.verify(token); // warm up
  const start = process.hrtime.bigint();
  for (let i = 0; i < ITERATIONS; i++) await verifier.verify(token);
  const us = Number(process.hrtime.bigint() - start) / 1000 / ITERATIONS;
  console.log(`${label.padEnd(28)}${us.toFixed(2).padStart(9)} µs/verify`);
  return us;
}

const secret = 'benchmark-secret-benchmark-secret-benchmark';
const hs = await new SignJWT(claims)
  .setProtectedHeader({ alg: 'HS256' })
  .setSubject('1')
  .setExpirationTime(exp)
  .sign(new TextEncoder().encode(secret));
const rsa = await generateKeyPair('RS256', { extractable: true });
const rs = await new SignJWT(claims)
  .setProtectedHeader({ alg: 'RS256' })
  .setSubject('1')
  .setExpirationTime(exp)
  .sign(rsa.privateKey);
const ec = await generateKeyPair('ES256', { extractable: true });
const es = await new SignJWT(claims)
  .setProtectedHeader({ alg: 'ES256' })
  .setSubject('1')
  .setExpirationTime(exp)
  .sign(ec.privateKey);

console.log(`${ITERATIONS} verifications of one token each, Node ${process.version}\n`);
for (const [alg, jwt, token] of [
  ['HS256', { ...none, secret }, hs],
  ['RS256', { ...none, publicKey: await exportSPKI(rsa.publicKey) }, rs],
  ['ES256', { ...none, publicKey: await exportSPKI(ec.publicKey) }, es],
] as const) {
  await measure(`${alg} without cache`, await TokenVerifier.create(jwt, { tokenCacheSize: 0 }), token);
  await measure(`${alg} with cache`, await TokenVerifier.create(jwt), token);
}
