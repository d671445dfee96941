// Bearer-token authentication and scope checks (docs/api-guide.md#authentication-and-scopes). Every path outside
// /api/public/** needs a valid JWT, known route or not; OPTIONS never does.
// Each route states the scope it needs in its config; a route without one fails start-up.
import { createPublicKey } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  createRemoteJWKSet,
  errors as joseErrors,
  importSPKI,
  jwtVerify,
  type CryptoKey,
  type JWTPayload,
  type JWTVerifyGetKey,
} from 'jose';
import { principalFrom, type Principal } from '../../auth/principal.js';
import type { Config } from '../../config/config.js';
import { Forbidden, Unauthenticated } from '../../errors.js';
import { requestPath } from '../request-url.js';
import { routeOptionsOf } from '../request-context.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The scope a caller needs for this route (docs/api-guide.md#authentication-and-scopes), e.g. 'users:read', or a list of which
     * any one will do (the event stream: 'orders:read' or 'users:read').
     */
    scope?: string | readonly string[];
    /**
     * Set on a route that only an administrator may use at all: the 403's detail when the token
     * lacks `admin` (e.g. 'Creating a user needs the admin scope.'). Checked with the scope,
     * before anything else runs, an Idempotency-Key's replay included.
     */
    admin?: string;
  }
  interface FastifyRequest {
    /** The authenticated caller; set on every route outside /api/public/**. */
    principal: Principal;
  }
}

export interface AuthOptions {
  /** Minimum time between JWKS refetches on an unknown kid (jose's cooldown). */
  jwksCooldownMs?: number;
  /** How many verified tokens to keep until they expire; 0 turns the cache off. */
  tokenCacheSize?: number;
  /**
   * How long a verified token, and a fetched JWKS, are trusted before they are checked again:
   * a key the provider withdrew stops being accepted within twice this (default 5 minutes).
   */
  keyCacheMaxAgeMs?: number;
}

/** Seconds of clock skew tolerated on exp and nbf. */
export const CLOCK_TOLERANCE_SECONDS = 30;

export function isPublicPath(path: string): boolean {
  return path === '/api/public' || path.startsWith('/api/public/');
}

type Key = Uint8Array | CryptoKey | JWTVerifyGetKey;

/**
 * Verifies access tokens against the configured key, with an allow-list of algorithms that
 * matches the key (never `none`, never HS256 with a public key), and keeps verified tokens
 * until they expire so that a client's repeated token is checked once.
 */
export class TokenVerifier {
  readonly #cache = new Map<string, { principal: Principal; expiresAt: number }>();

  private constructor(
    private readonly key: Key,
    private readonly algorithms: string[],
    private readonly jwt: Config['jwt'],
    private readonly cacheSize: number,
    private readonly cacheMaxAgeMs: number,
  ) {}

  static async create(jwt: Config['jwt'], options: AuthOptions = {}): Promise<TokenVerifier> {
    const cacheSize = options.tokenCacheSize ?? 10_000;
    const maxAge = options.keyCacheMaxAgeMs ?? 5 * 60_000;
    if (jwt.secret !== undefined)
      return new TokenVerifier(new TextEncoder().encode(jwt.secret), ['HS256'], jwt, cacheSize, maxAge);
    if (jwt.publicKey !== undefined) {
      const type = createPublicKey(jwt.publicKey).asymmetricKeyType;
      const alg = type === 'rsa' ? 'RS256' : type === 'ec' ? 'ES256' : undefined;
      if (alg === undefined) throw new Error(`JWT_PUBLIC_KEY must be an RSA or EC (P-256) key, not ${type}`);
      return new TokenVerifier(await importSPKI(jwt.publicKey, alg), [alg], jwt, cacheSize, maxAge);
    }
    if (jwt.jwksUrl !== undefined) {
      const jwks = createRemoteJWKSet(new URL(jwt.jwksUrl), {
        cooldownDuration: Math.min(options.jwksCooldownMs ?? 30_000, maxAge),
        cacheMaxAge: maxAge,
      });
      return new TokenVerifier(jwks, ['RS256', 'ES256'], jwt, cacheSize, maxAge);
    }
    throw new Error('No JWT key is configured');
  }

  /** How many verified tokens are held now. */
  get cachedTokens(): number {
    return this.#cache.size;
  }

  /** The principal of a token verified before and not yet expired, without waiting. */
  cached(token: string): Principal | undefined {
    const hit = this.#cache.get(token);
    if (hit === undefined) return undefined;
    if (hit.expiresAt > Date.now()) return hit.principal;
    this.#cache.delete(token);
    return undefined;
  }

  async verify(token: string): Promise<Principal> {
    const hit = this.cached(token);
    if (hit !== undefined) return hit;
    const { payload } = await jwtVerify(token, this.key as Uint8Array, {
      algorithms: this.algorithms,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ['exp', 'sub'],
      ...(this.jwt.issuer ? { issuer: this.jwt.issuer } : {}),
      ...(this.jwt.audience ? { audience: this.jwt.audience } : {}),
    });
    // requiredClaims made jose refuse a token without them.
    const { sub = '', exp = 0 } = payload;
    const principal = principalFrom(sub, scopesOf(payload), exp * 1000);
    if (this.cacheSize > 0) {
      // Oldest first out: a Map iterates in insertion order.
      const oldest = this.#cache.keys().next();
      if (this.#cache.size >= this.cacheSize && oldest.done !== true) this.#cache.delete(oldest.value);
      // Until it expires, but no longer than the key cache's age: a withdrawn key ends its tokens.
      const expiresAt = Math.min((exp + CLOCK_TOLERANCE_SECONDS) * 1000, Date.now() + this.cacheMaxAgeMs);
      this.#cache.set(token, { principal, expiresAt });
    }
    return principal;
  }
}

/** docs/api-guide.md#authentication-and-scopes: scopes from `scope` (space-separated) or `scp` (array, or string). */
function scopesOf(payload: JWTPayload): string[] {
  const out: string[] = [];
  for (const raw of [payload.scope, payload.scp]) {
    if (typeof raw === 'string') out.push(...raw.split(' ').filter((s) => s !== ''));
    else if (Array.isArray(raw)) out.push(...raw.filter((s): s is string => typeof s === 'string'));
  }
  return out;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

async function auth(app: FastifyInstance, options: AuthOptions): Promise<void> {
  const verifier = await TokenVerifier.create(app.config.jwt, options);

  // A route cannot be added without stating its scope.
  app.addHook('onRoute', (route) => {
    if (route.method === 'OPTIONS' || isPublicPath(route.url)) return;
    const scope = route.config?.scope;
    if (scope === undefined || scope.length === 0)
      throw new Error(
        `${String(route.method)} ${route.url} declares no scope (route config.scope, docs/api-guide.md#authentication-and-scopes)`,
      );
  });

  app.decorateRequest('principal', null as unknown as Principal);
  // Callback-style: a token seen before is answered from the cache without a promise.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'OPTIONS' || isPublicPath(requestPath(request))) return done();
    const header = request.headers.authorization;
    // The usual case first: "Bearer <a token verified before>". A cached token passed BEARER's
    // check when it was first seen, so the header needs no regular expression now.
    if (header !== undefined && header.startsWith('Bearer ')) {
      const cached = verifier.cached(header.slice(7));
      if (cached !== undefined) return done(authorize(request, cached));
    }
    const match = header === undefined ? null : BEARER.exec(header);
    if (match === null)
      return reject(request, reply, done, new Unauthenticated('A Bearer access token is required.', false));
    const [, token = ''] = match;
    const cached = verifier.cached(token);
    if (cached !== undefined) return done(authorize(request, cached));
    verifier.verify(token).then(
      (principal) => done(authorize(request, principal)),
      (error: unknown) => {
        if (error instanceof joseErrors.JWTExpired)
          return reject(request, reply, done, new Unauthenticated('The access token has expired.', true));
        if (error instanceof joseErrors.JOSEError)
          return reject(request, reply, done, new Unauthenticated('The access token is invalid.', true));
        done(error as Error);
      },
    );
  });
}

/**
 * Refuses with a 401, which counts against the address's anonymous quota (docs/api-guide.md#rate-limits): guessing
 * tokens is slow.
 */
function reject(
  request: FastifyRequest,
  reply: FastifyReply,
  done: (error?: Error) => void,
  error: Unauthenticated,
): void {
  const limit = request.server.rateLimitAnonymous;
  if (limit === undefined) {
    done(error);
    return;
  }
  limit(request, reply, (limited) => {
    done(limited ?? error);
  });
}

/** Sets the caller; the route's scope error when it lacks the scope (docs/api-guide.md#authentication-and-scopes). */
function authorize(request: FastifyRequest, principal: Principal): Forbidden | undefined {
  request.principal = principal;
  const { scope, admin } = routeOptionsOf(request).config;
  if (scope === undefined) return undefined;
  if (typeof scope === 'string') {
    if (!principal.scopes.has(scope)) return new Forbidden(`This request needs the ${scope} scope.`, scope);
  } else if (!scope.some((s) => principal.scopes.has(s)))
    return new Forbidden(`This request needs one of the scopes ${scope.join(', ')}.`, scope.join(' '));
  return admin !== undefined && !principal.admin ? new Forbidden(admin, 'admin') : undefined;
}

export default fp(auth, { name: 'auth', dependencies: ['request-context'] });
