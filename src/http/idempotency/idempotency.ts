// Idempotency-Key on every POST and PATCH (docs/api-guide.md#safe-retries, draft-ietf-httpapi-idempotency-key-header).
// One mechanism for all routes: hooks added to each POST and PATCH route as it is declared.
//
// A request sent with a key runs in one database transaction (idempotency.repository.ts) that
// holds the key's lock: handlers reach it as `request.db` (database/request-db.ts). When the answer is ready (onSend),
// a 2xx is stored with the writes and both commit; a 409 or 422 is stored after the writes are
// rolled back; anything else rolls back and stores nothing, so a retry runs again. A retry
// with the same key and fingerprint (method, routed path, SHA-256 of the body) gets the stored
// answer byte for byte plus `Idempotent-Replayed: true`; another request under the key gets
// 422; a retry while the first still runs gets 409 with Retry-After: 1.
//
// Nothing stored gives away a request or its answer: the fingerprint is an HMAC under a key
// derived from ENCRYPTION_KEY (the bodies hold passwords, which a plain hash would let a
// database reader guess), and the stored answer (which may hold a webhook secret) is encrypted
// under ENCRYPTION_KEY (crypto/encryption.ts).
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onSendAsyncHookHandler,
  preHandlerAsyncHookHandler,
  RouteOptions,
} from 'fastify';
import fp from 'fastify-plugin';
import type { Db } from '../../db/database.js';
import {
  beginKeyed,
  commitKeyed,
  purgeExpiredKeys,
  rollbackKeyed,
  type KeyedTransaction,
  type StoredOutcome,
} from './idempotency.repository.js';
import { DatabaseUnavailable, IdempotencyKeyInUse, IdempotencyKeyReused, InvalidIdempotencyKey } from '../../errors.js';
import { answerBinding } from '../../crypto/encryption.js';
import { withoutQuery } from '../request-url.js';
import { requestDb } from '../../tracing/http-spans.js';

/** The response headers stored with an outcome and replayed (docs/api-guide.md#safe-retries). */
const STORED_HEADERS = ['content-type', 'location', 'etag'] as const;

const kKeyed = Symbol('idempotency.keyed');
const kRawBody = Symbol('idempotency.rawBody');

interface KeyedRequest {
  /** The open transaction, until the answer is stored or dropped. */
  keyed?: KeyedTransaction;
  fingerprint: string;
  /** What the fingerprint is of, to compare with one stored under another key. */
  parts: [string, string];
  /** Set once the answer is sent: a transaction opened after that is rolled back at once. */
  done: boolean;
  /** The row its answer is stored in (its subject and key), which the ciphertext is bound to. */
  binding: string;
}

type WithState = FastifyRequest & { [kKeyed]?: KeyedRequest; [kRawBody]?: string };

/** The request's keyed transaction while it holds its Idempotency-Key (database/request-db.ts). */
export function keyedDbOf(request: FastifyRequest): Db | undefined {
  return (request as WithState)[kKeyed]?.keyed?.db;
}

/** Keeps the raw body of a keyed request for its fingerprint (called by the JSON parser). */
export function keepBodyForFingerprint(request: FastifyRequest, body: string): void {
  if (request.headers['idempotency-key'] !== undefined) (request as WithState)[kRawBody] = body;
}

/**
 * The key, from a structured-field string ("…") or a bare token: 1–255 visible ASCII
 * characters without `"` or `\`. Anything else (an empty string, spaces, a list) is undefined.
 */
export function parseIdempotencyKey(header: string): string | undefined {
  const m = /^"([^"]*)"$/.exec(header);
  const key = m ? (m[1] ?? '') : header;
  return /^[\x21\x23-\x5b\x5d-\x7e]{1,255}$/.test(key) ? key : undefined;
}

/** What a request's fingerprint is of: its method and routed path, and its body. */
function fingerprinted(request: FastifyRequest): [string, string] {
  return [`${request.method} ${withoutQuery(request.url)}\n`, (request as WithState)[kRawBody] ?? ''];
}

/** The statuses whose answer is stored (docs/api-guide.md#safe-retries); 400, 401, 403, 404 and 5xx run again. */
function storable(status: number): boolean {
  return (status >= 200 && status < 300) || status === 409 || status === 422;
}

function replay(reply: FastifyReply, outcome: StoredOutcome): FastifyReply {
  return reply
    .code(outcome.status)
    .headers(outcome.headers)
    .header('idempotent-replayed', 'true')
    .send(outcome.body === null ? undefined : Buffer.from(outcome.body)); // a Buffer goes out as stored
}

async function idempotency(app: FastifyInstance): Promise<void> {
  const { db, encryption } = app;
  const ttlHours = app.config.idempotencyTtlHours;

  /**
   * A stored answer, decrypted. One that no configured key decrypts (the key it was stored under
   * is gone) cannot be replayed, and running the request again could do it twice: 503, and the
   * operator is told why.
   */
  function readStored(request: FastifyRequest, body: string | null, binding: string): string | null {
    if (body === null) return null;
    try {
      return encryption.decrypt(body, 'idempotency-answer', binding);
    } catch (error) {
      request.log.error({ err: error }, 'a stored Idempotency-Key answer cannot be decrypted');
      throw new DatabaseUnavailable({ cause: error });
    }
  }

  const preHandler: preHandlerAsyncHookHandler = async (request, reply) => {
    const header = request.headers['idempotency-key'];
    if (header === undefined) return;
    const key = typeof header === 'string' ? parseIdempotencyKey(header) : undefined;
    if (key === undefined) throw new InvalidIdempotencyKey();

    const parts = fingerprinted(request);
    const state: KeyedRequest = {
      fingerprint: encryption.fingerprint(parts),
      parts,
      done: false,
      binding: answerBinding(request.principal.subject, key),
    };
    (request as WithState)[kKeyed] = state;
    const { keyed, state: found } = await beginKeyed(requestDb(request, db), request.principal.subject, key);
    if (state.done) {
      // The request was answered meanwhile (it timed out): nothing may run in this transaction.
      await rollbackKeyed(keyed);
      return;
    }
    if (found.kind === 'busy') throw new IdempotencyKeyInUse();
    if (found.kind === 'stored') {
      await rollbackKeyed(keyed);
      if (!encryption.fingerprintMatches(found.outcome.fingerprint, state.fingerprint, parts))
        throw new IdempotencyKeyReused();
      return replay(reply, { ...found.outcome, body: readStored(request, found.outcome.body, state.binding) });
    }
    state.keyed = keyed;
  };

  const onSend: onSendAsyncHookHandler = async (request, reply, payload) => {
    const state = (request as WithState)[kKeyed];
    if (state === undefined) return payload;
    state.done = true;
    const { keyed } = state;
    if (keyed === undefined) return payload;
    state.keyed = undefined; // an error thrown below is answered without coming back here

    const status = reply.statusCode;
    if (!storable(status)) {
      await rollbackKeyed(keyed);
      return payload;
    }
    const headers: Record<string, string> = {};
    for (const name of STORED_HEADERS) {
      const value = reply.getHeader(name);
      if (value !== undefined) headers[name] = String(value);
    }
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString() : null;
    const sealed = body === null ? null : encryption.encrypt(body, 'idempotency-answer', state.binding);
    await commitKeyed(
      keyed,
      { fingerprint: state.fingerprint, status, headers, body: sealed },
      ttlHours,
      status >= 400,
    );
    return payload;
  };

  // A client that goes away does not stop the request: it runs on and its answer is stored, so
  // that the retry gets it. This is only a net for a response that ended without onSend.
  const onResponse = async (request: FastifyRequest) => {
    const state = (request as WithState)[kKeyed];
    if (state === undefined) return;
    state.done = true;
    if (state.keyed !== undefined) await rollbackKeyed(state.keyed);
    state.keyed = undefined;
  };

  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.some((m) => m === 'POST' || m === 'PATCH')) return;
    // Keys are scoped by the caller; a public path has none (the reset's completion is single-use).
    if (route.url.startsWith('/api/public/')) return;
    route.preHandler = [...toArray(route.preHandler), preHandler];
    route.onSend = [...toArray(route.onSend), onSend];
    route.onResponse = [...toArray(route.onResponse), onResponse];
  });

  // Expired keys are deleted in the background, by every instance (a delete of nothing is cheap).
  const purgeEveryMs = Math.min(10 * 60_000, Math.max(1000, (ttlHours * 3_600_000) / 24));
  const purge = setInterval(() => {
    purgeExpiredKeys(db).catch((error: unknown) => {
      app.log.warn({ err: error }, 'purging expired idempotency keys failed');
    });
  }, purgeEveryMs);
  purge.unref();
  app.addHook('onClose', (_app, done) => {
    clearInterval(purge);
    done();
  });
}

function toArray<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

export default fp(idempotency, { name: 'idempotency' });
