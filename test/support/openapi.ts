// The served OpenAPI document with every $ref replaced by what it points to, for tests that
// read a schema or a response where an operation uses it.
import type { FastifyInstance } from 'fastify';

/** The segments of a local JSON pointer ("#/components/schemas/User"), unescaped. */
export function refPath(ref: string): string[] {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .map((key) => key.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** What `path` names inside `root`, or undefined. */
export function at(root: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], root);
}

export function inline(node: unknown, root: unknown): unknown {
  if (Array.isArray(node)) return node.map((item) => inline(item, root));
  if (typeof node !== 'object' || node === null) return node;
  const ref = (node as { $ref?: unknown }).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/')) return inline(at(root, refPath(ref)), root);
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, inline(value, root)]));
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests describe the part they read
export async function resolvedDocument<T = any>(app: FastifyInstance): Promise<T> {
  const document: unknown = (await app.inject({ method: 'GET', url: '/api/public/openapi.json' })).json();
  return inline(document, document) as T;
}
