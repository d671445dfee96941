// The cross-origin policy of docs/api-guide.md#cross-origin-requests-cors. Written here rather than through
// @fastify/cors, which applies no per-path policy to preflights, answers a refused preflight
// with Access-Control-Allow-* headers, and does not check the requested method and headers.
//
// Policies match by path, first match wins: /api/public/** (any origin echoed, GET only, no
// credentials), then /api/** (the configured origins, credentials allowed). Every answer under
// a policy carries Vary: Origin, since it depends on the origin; errors carry the same CORS
// headers as successes because they are set before anything else can fail.
import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { requestPath } from './request-url.js';
import type { RouteTable } from './route-table.js';

export interface CorsPolicy {
  readonly prefix: string;
  readonly allowsOrigin: (origin: string) => boolean;
  readonly credentials: boolean;
  readonly methods: readonly string[];
  readonly allowedHeaders: readonly string[];
  readonly exposedHeaders: readonly string[];
  readonly maxAge: number;
}

const MAX_AGE = 3600;
// docs/api-guide.md#safe-retries: the spec's two, and those of the additive features (conditional requests,
// idempotency keys, header versioning, request ids, resumable event streams, W3C Trace Context).
const ALLOWED_HEADERS = [
  'Content-Type',
  'Authorization',
  'If-Match',
  'If-None-Match',
  'Idempotency-Key',
  'X-API-Version',
  'X-Request-Id',
  'Last-Event-ID',
  'traceparent',
  'tracestate',
];
// docs/api-guide.md#safe-retries, docs/api-guide.md#rate-limits: the spec's two, then validators, page links, when to retry, replays, the
// quota, and the request id to quote in a support ticket.
export const EXPOSED_HEADERS = [
  'X-Total-Count',
  'Location',
  'ETag',
  'Link',
  'Retry-After',
  'Idempotent-Replayed',
  'RateLimit',
  'RateLimit-Policy',
  'X-Request-Id',
];
const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/** Lower-case scheme and host, default port dropped; undefined when it is not an origin. */
export function normalizeOrigin(origin: string): string | undefined {
  const m = /^(https?):\/\/([^/:?#\s]+)(?::(\d{1,5}))?$/i.exec(origin.trim());
  if (m === null) return undefined;
  const [, rawScheme = '', host = '', rawPort] = m;
  const scheme = rawScheme.toLowerCase();
  const port = rawPort !== undefined && DEFAULT_PORTS[`${scheme}:`] !== rawPort ? `:${Number(rawPort)}` : '';
  return `${scheme}://${host.toLowerCase()}${port}`;
}

/**
 * Compiles the configured origins into one test. In a pattern, `*` stands for one or more
 * subdomain labels; a pattern without a port matches only the scheme's default port.
 */
export function originMatcher(configured: readonly string[]): (origin: string) => boolean {
  const exact = new Set<string>();
  const patterns: RegExp[] = [];
  for (const entry of configured) {
    if (entry.includes('*')) {
      const normalized = normalizeOrigin(entry.replace(/\*/g, 'wildcard-label')) ?? entry.toLowerCase();
      const source = normalized
        .split('wildcard-label')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\\.)*[a-z0-9](?:[a-z0-9-]*[a-z0-9])?');
      patterns.push(new RegExp(`^${source}$`));
    } else {
      const normalized = normalizeOrigin(entry);
      if (normalized !== undefined) exact.add(normalized);
    }
  }
  return (origin) => {
    const normalized = normalizeOrigin(origin);
    if (normalized === undefined) return false;
    return exact.has(normalized) || patterns.some((p) => p.test(normalized));
  };
}

export function corsPolicies(allowedOrigins: readonly string[]): CorsPolicy[] {
  return [
    {
      prefix: '/api/public/',
      allowsOrigin: (origin) => normalizeOrigin(origin) !== undefined,
      credentials: false,
      methods: ['GET'],
      allowedHeaders: ALLOWED_HEADERS,
      exposedHeaders: EXPOSED_HEADERS,
      maxAge: MAX_AGE,
    },
    {
      prefix: '/api/',
      allowsOrigin: originMatcher(allowedOrigins),
      credentials: true,
      methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
      allowedHeaders: ALLOWED_HEADERS,
      exposedHeaders: EXPOSED_HEADERS,
      maxAge: MAX_AGE,
    },
  ];
}

/** Adds fields to Vary, keeping what is there and listing each once. */
export function appendVary(reply: FastifyReply, ...fields: string[]): void {
  const current = reply.getHeader('vary');
  if (current === undefined && fields.length === 1) {
    reply.header('vary', fields[0]);
    return;
  }
  const list = typeof current === 'string' && current !== '' ? current.split(',').map((f) => f.trim()) : [];
  const lower = new Set(list.map((f) => f.toLowerCase()));
  for (const field of fields) if (!lower.has(field.toLowerCase())) list.push(field);
  reply.header('vary', list.join(', '));
}

/** A policy with its decisions kept per Origin value, and what its answers carry. */
export interface CompiledPolicy extends CorsPolicy {
  readonly root: string;
  readonly exposed: string;
}

/**
 * The policies of a configuration, compiled once: one implementation of the policy for every
 * answer, Fastify's (the hook below) and the refusals written before Fastify
 * (overload/admission.ts).
 */
export class CorsRules {
  readonly #policies: CompiledPolicy[];

  constructor(allowedOrigins: readonly string[]) {
    // Each policy's decision per Origin value is kept: a service sees few origins, and checking
    // one normalizes it with a regular expression. Bounded: a flood of made-up origins only
    // empties the memo.
    this.#policies = corsPolicies(allowedOrigins).map((policy) => {
      const decided = new Map<string, boolean>();
      const allowsOrigin = (origin: string): boolean => {
        let allowed = decided.get(origin);
        if (allowed === undefined) {
          allowed = policy.allowsOrigin(origin);
          if (decided.size >= 1000) decided.clear();
          decided.set(origin, allowed);
        }
        return allowed;
      };
      return { ...policy, allowsOrigin, root: policy.prefix.slice(0, -1), exposed: policy.exposedHeaders.join(', ') };
    });
  }

  /** `/api/public` and everything under `/api/public/` fall under the `/api/public/` policy. */
  policyFor(path: string): CompiledPolicy | undefined {
    return this.#policies.find((p) => path.startsWith(p.prefix) || path === p.root);
  }

  /**
   * The CORS headers of an answer that is not a preflight, under `policy`: the origin echoed
   * (with credentials where the policy allows them) when the policy admits it and the method.
   */
  static simpleHeaders(
    policy: CompiledPolicy,
    method: string,
    origin: string | undefined,
    set: (name: string, value: string) => void,
  ): void {
    const m = method === 'HEAD' ? 'GET' : method;
    if (origin === undefined || !policy.allowsOrigin(origin) || !policy.methods.includes(m)) return;
    set('access-control-allow-origin', origin);
    if (policy.credentials) set('access-control-allow-credentials', 'true');
    set('access-control-expose-headers', policy.exposed);
  }
}

async function cors(app: FastifyInstance, { routes, rules }: { routes: RouteTable; rules: CorsRules }): Promise<void> {
  const policyFor = (path: string) => rules.policyFor(path);

  app.addHook('onRequest', (request, reply, done) => {
    const path = requestPath(request);
    const policy = policyFor(path);
    if (policy === undefined) return done();
    appendVary(reply, 'Origin');
    const origin = request.headers.origin;
    const requestedMethod = request.headers['access-control-request-method'];

    if (request.method === 'OPTIONS' && requestedMethod !== undefined) {
      // A preflight: never authenticated; refused ones get no Allow-* header.
      appendVary(reply, 'Access-Control-Request-Method', 'Access-Control-Request-Headers');
      const requestedHeaders = (request.headers['access-control-request-headers'] ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase())
        .filter((h) => h !== '');
      const allowedHeaders = new Set(policy.allowedHeaders.map((h) => h.toLowerCase()));
      if (
        origin !== undefined &&
        policy.allowsOrigin(origin) &&
        policy.methods.includes(requestedMethod.toUpperCase()) &&
        requestedHeaders.every((h) => allowedHeaders.has(h))
      ) {
        reply.header('access-control-allow-origin', origin);
        if (policy.credentials) reply.header('access-control-allow-credentials', 'true');
        reply.header('access-control-allow-methods', policy.methods.join(', '));
        reply.header('access-control-allow-headers', policy.allowedHeaders.join(', '));
        reply.header('access-control-max-age', String(policy.maxAge));
      }
      reply.code(204).send();
      return;
    }

    CorsRules.simpleHeaders(policy, request.method, origin, (name, value) => {
      reply.header(name, value);
    });
    done();
  });

  // An OPTIONS that is not a preflight asks which methods a path has.
  app.options('/*', { config: { routeTable: false }, schema: { hide: true } }, async (request, reply) => {
    const allowed = routes.allowed(requestPath(request));
    if (allowed.length === 0) {
      reply.callNotFound();
      return reply;
    }
    return reply.code(204).header('allow', allowed.join(', ')).send();
  });
}

export default fp(cors, { name: 'cors', dependencies: ['request-context'] });
