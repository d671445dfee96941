// The layering rules of docs/architecture.md are lint rules (eslint.boundaries.js). This proves
// each one fires on a violation at the path where it applies, stays quiet on the allowed form,
// and that the tree as it stands passes them.
import { ESLint } from 'eslint';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { boundaries } from '../../eslint.boundaries.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: true, overrideConfig: boundaries });

async function violations(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? 'parse'}: ${m.message}`);
}

describe('layer boundaries', () => {
  it.each([
    ['a service importing Fastify', 'src/orders/orders.service.ts', "import type { FastifyRequest } from 'fastify';"],
    ['a service importing a Fastify plugin', 'src/users/users.service.ts', "import cors from '@fastify/cors';"],
    ["a service importing Kysely's sql", 'src/users/users.service.ts', "import { sql } from 'kysely';"],
    [
      'a service building a query on its db handle',
      'src/orders/orders.service.ts',
      "export const f = (trx: any) => trx.selectFrom('users').selectAll().execute();",
    ],
    ['a route importing Kysely', 'src/users/users.routes.ts', "import type { Kysely } from 'kysely';"],
    [
      'a route importing a repository',
      'src/orders/orders.routes.ts',
      "import * as repo from './orders.repository.js';",
    ],
    [
      'a route importing a table',
      'src/products/stock.routes.ts',
      "import type { StockRow } from './products.table.js';",
    ],
    ['an HTTP plugin importing Kysely', 'src/http/cors.ts', "import { sql } from 'kysely';"],
    ['a public route importing Kysely', 'src/public/health.routes.ts', "import { sql } from 'kysely';"],
    [
      'a repository importing wire schemas',
      'src/users/users.repository.ts',
      "import type { X } from './users.schemas.js';",
    ],
    [
      'orders reaching into the stock repository',
      'src/orders/orders.service.ts',
      "import { reserveStock } from '../products/stock.repository.js';",
    ],
    [
      'orders reaching into the products table',
      'src/orders/orders.table.ts',
      "import type { ProductRow } from '../products/products.table.js';",
    ],
    ['products reaching into orders', 'src/products/products.service.ts', "import { x } from '../orders/money.js';"],
    [
      'users reaching into the orders service',
      'src/users/users.service.ts',
      "import { getOrder } from '../orders/orders.service.js';",
    ],
    [
      'webhooks reaching into the events repository',
      'src/webhooks/delivery/dispatcher.ts',
      "import { insertEvent } from '../../events/events.repository.js';",
    ],
    [
      'events reaching into the webhook dispatcher',
      'src/events/events.repository.ts',
      "import { Dispatcher } from '../webhooks/delivery/dispatcher.js';",
    ],
    ['a resource importing postgres.js', 'src/webhooks/delivery/plugin.ts', "import postgres from 'postgres';"],
    [
      'a repository importing PGlite',
      'src/users/users.repository.ts',
      "import { PGlite } from '@electric-sql/pglite';",
    ],
    ['the framework importing postgres.js', 'src/http/database/read-replicas.ts', "import postgres from 'postgres';"],
    ['a top-level module importing postgres.js', 'src/server.ts', "import postgres from 'postgres';"],
    [
      'the framework importing a resource',
      'src/http/openapi/openapi.ts',
      "import { x } from '../../webhooks/index.js';",
    ],
    ['a framework file importing a resource', 'src/http/cors.ts', "import { x } from '../users/index.js';"],
    [
      'a framework file importing a feature room’s repository',
      'src/http/versioning/content-negotiation.ts',
      "import { beginKeyed } from './idempotency/idempotency.repository.js';",
    ],
    [
      'a feature room importing another room’s repository',
      'src/http/paging/pagination.ts',
      "import { beginKeyed } from '../idempotency/idempotency.repository.js';",
    ],
    [
      'a feature room’s plugin importing Kysely',
      'src/http/idempotency/idempotency.ts',
      "import { sql } from 'kysely';",
    ],
  ])('refuses %s', async (_what, filePath, code) => {
    const found = await violations(filePath, code);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^no-restricted-(imports|syntax): /);
  });

  it.each([
    ['a service importing Kysely types', 'src/orders/orders.service.ts', "import type { Transaction } from 'kysely';"],
    [
      'a service calling its repository',
      'src/users/users.service.ts',
      "import * as repo from './users.repository.js';",
    ],
    [
      'orders through the products entry point',
      'src/orders/orders.service.ts',
      "import { x } from '../products/index.js';",
    ],
    ['a repository importing Kysely', 'src/users/users.repository.ts', "import { sql } from 'kysely';"],
    ['a db/ module importing Kysely', 'src/db/database.ts', "import { sql } from 'kysely';"],
    ['a db/ module importing postgres.js', 'src/db/notifications.ts', "import postgres from 'postgres';"],
    [
      'webhooks through the events entry point',
      'src/webhooks/delivery/plugin.ts',
      "import { deliveryHandoff } from '../../events/index.js';",
    ],
    [
      'a feature room’s plugin importing its own repository',
      'src/http/idempotency/idempotency.ts',
      "import { beginKeyed } from './idempotency.repository.js';",
    ],
    [
      'a feature room’s repository importing Kysely',
      'src/http/idempotency/idempotency.repository.ts',
      "import { sql } from 'kysely';",
    ],
    [
      'app.ts, the composition root, importing a resource',
      'src/app.ts',
      "import x from './webhooks/delivery/plugin.js';",
    ],
    [
      'a test reaching anywhere',
      'src/orders/order-status.test.ts',
      "import * as repo from '../products/stock.repository.js';",
    ],
  ])('allows %s', async (_what, filePath, code) => {
    expect(await violations(filePath, code)).toEqual([]);
  });

  it('holds for every file under src/', async () => {
    const results = await eslint.lintFiles(['src/**/*.ts']);
    expect(results.length).toBeGreaterThan(50);
    const found = results.flatMap((r) => r.messages.map((m) => `${r.filePath}:${m.line} ${m.message}`));
    expect(found).toEqual([]);
  });

  it('has no import cycle between resources (types included), and at most 16 files at the top of src/http/', () => {
    const RESOURCES = ['users', 'orders', 'products', 'events', 'webhooks'];
    const src = join(ROOT, 'src');
    const folderOf = (path: string) => relative(src, path).split('/')[0]!;
    const uses = new Map(RESOURCES.map((r) => [r, new Set<string>()]));
    for (const resource of RESOURCES)
      for (const entry of readdirSync(join(src, resource), { recursive: true, withFileTypes: true })) {
        if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts')) continue;
        const file = join(entry.parentPath, entry.name);
        for (const [, spec] of readFileSync(file, 'utf8').matchAll(/^(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'/gm)) {
          const target = folderOf(join(dirname(file), spec!));
          if (target !== resource && RESOURCES.includes(target)) uses.get(resource)!.add(target);
        }
      }
    const cycles: string[] = [];
    const walk = (path: string[]) => {
      for (const next of uses.get(path.at(-1)!) ?? []) {
        if (next === path[0]) cycles.push([...path, next].join(' → '));
        else if (!path.includes(next)) walk([...path, next]);
      }
    };
    for (const resource of RESOURCES) walk([resource]);

    expect(cycles).toEqual([]);
    expect([...uses.get('events')!]).toEqual([]); // events know no other resource: they are written by them
    const files = readdirSync(join(src, 'http'), { withFileTypes: true }).filter((e) => e.isFile());
    expect(files.length).toBeLessThanOrEqual(16);
  });
});
