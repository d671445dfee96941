// The served OpenAPI document with every $ref replaced by what it points to, for tests that
// read a schema or a response where an operation uses it.
import type { FastifyInstance } from 'fastify';

function inline(node: unknown, root: unknown): unknown {
  if (Array.isArray(node)) return node.map((item) => inline(item, root));
  if (typeof node !== 'object' || node === null) return node;
  const ref = (node as { $ref?: unknown }).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/')) {
    const target = ref
      .slice(2)
      .split('/')
      .reduce<unknown>((at, key) => (at as Record<string, unknown>)[key.replace(/~1/g, '/').replace(/~0/g, '~')], root);
    return inline(target, root);
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, inline(value, root)]));
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests describe the part they read
export async function resolvedDocument<T = any>(app: FastifyInstance): Promise<T> {
  const document: unknown = (await app.inject({ method: 'GET', url: '/api/public/openapi.json' })).json();
  return inline(document, document) as T;
}
