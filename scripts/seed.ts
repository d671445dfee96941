// npm run seed: loads a few demo products with stock into the running service, through its
// own API (so it works on either engine, and never opens the embedded database a second
// time). Signs an admin token with the configured secret (or the development one in DATA_DIR).
// Target: SEED_URL, else BASE_URL, else http://localhost:$PORT. Safe to run twice.
import { signToken } from './sign-token.js';

const DEMO = [
  { sku: 'DEMO-MUG', name: 'Enamel mug', description: 'Holds 350 ml of coffee.', price: 12.5, available: 25 },
  { sku: 'DEMO-TEE', name: 'Cotton T-shirt', description: 'Organic cotton, size M.', price: 19.99, available: 40 },
  { sku: 'DEMO-NOTEBOOK', name: 'Dotted notebook', description: 'A5, 160 pages.', price: 8.75, available: 3 },
];

try {
  const { token, config } = await signToken({
    sub: 'seed',
    scope: 'admin products:read products:write',
    expires: '5m',
    purpose: 'npm run seed',
  });
  const base = (process.env.SEED_URL ?? config.baseUrl).replace(/\/+$/, '');
  const headers = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
  };

  for (const { available, ...product } of DEMO) {
    const created = await fetch(`${base}/api/products`, { method: 'POST', headers, body: JSON.stringify(product) });
    if (created.status === 409) {
      // Made before (the README's quick start, then the guide): say which id it has.
      const listed = await fetch(`${base}/api/products?size=100`, { headers });
      const page = listed.ok ? ((await listed.json()) as { content: { id: number; sku: string }[] }) : { content: [] };
      const id = page.content.find((p) => p.sku === product.sku)?.id;
      console.log(`${product.sku}: ${id === undefined ? 'already there' : `product ${id}, already there`}`);
      continue;
    }
    if (created.status !== 201)
      throw new Error(`POST /api/products answered ${created.status}: ${await created.text()}`);
    const { id } = (await created.json()) as { id: number };
    const stock = await fetch(`${base}/api/stock/${id}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ available }),
    });
    if (stock.status !== 200) throw new Error(`PUT /api/stock/${id} answered ${stock.status}: ${await stock.text()}`);
    console.log(`${product.sku}: product ${id}, ${available} in stock, ${product.price}`);
  }
} catch (error) {
  const cause = (error as { cause?: { code?: string } }).cause?.code;
  console.error(
    cause === 'ECONNREFUSED'
      ? 'npm run seed talks to the running service: start it first (npm start)'
      : error instanceof Error
        ? error.message
        : error,
  );
  process.exit(1);
}
