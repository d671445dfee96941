// Entity tags from a resource's version (docs/api-guide.md#products-and-stock): ETag "<version>". If-None-Match uses weak
// comparison and accepts lists and *; If-Match uses strong comparison (RFC 9110 §13.1).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IfMatch } from '../preconditions.js';

export function etagFor(version: number): string {
  return `"${version}"`;
}

function tags(header: string): string[] {
  return header
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
}

/** True when the client's copy is current: answer 304. */
export function noneMatchHits(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  const opaque = etag.replace(/^W\//, '');
  return tags(ifNoneMatch).some((t) => t === '*' || t.replace(/^W\//, '') === opaque);
}

/**
 * The versions an If-Match header allows, '*' for any, or undefined when the header is absent.
 * Weak tags never match strongly, so they are dropped; an empty list then matches nothing.
 */
export function ifMatchVersions(ifMatch: string | undefined): IfMatch | undefined {
  if (ifMatch === undefined) return undefined;
  const list = tags(ifMatch);
  if (list.includes('*')) return '*';
  return list.flatMap((t) => {
    const m = /^"(\d{1,9})"$/.exec(t);
    return m ? [Number(m[1])] : [];
  });
}

/** The request's If-Match, for a service's conditional write. */
export function ifMatchOf(request: FastifyRequest): IfMatch | undefined {
  return ifMatchVersions(request.headers['if-match']);
}

/**
 * Sets `ETag: "<version>"` for the representation about to be sent; a GET whose If-None-Match
 * names it is answered 304 without a body instead (docs/api-guide.md#products-and-stock, docs/api-guide.md#safe-retries).
 */
export function versioned<T extends { version: number }>(
  request: FastifyRequest,
  reply: FastifyReply,
  entity: T,
): T | FastifyReply {
  const etag = etagFor(entity.version);
  reply.header('etag', etag);
  if (request.method === 'GET' && noneMatchHits(request.headers['if-none-match'], etag))
    return reply.code(304).send(undefined);
  return entity;
}
