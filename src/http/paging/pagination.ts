// The page envelope and its headers: X-Total-Count and an RFC 8288 Link with
// first/last always and prev/next where they exist, each keeping size, sort and filters.
//
// prev and next also carry a cursor (docs/lists.md): the sort key of the row just before
// (after) the page they lead to, signed, so that a client following links gets each page by a
// keyset seek at any depth and, while rows are inserted or deleted, skips or repeats none.
// A cursor is bound to its list, its query (sort and filters), its page number and size: any
// other use, or any change to it, is a 400 in the route's validation form.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { loadCursorSecret } from './cursor-secret.repository.js';
import type { Db } from '../../db/database.js';
import { MAX_PAGE_SIZE, type PageOf, type RowKey, type Seek } from '../../page.js';
import { InvalidFields } from '../problems/field-errors.js';
import { CURSOR_PATTERN } from '../schemas.js';
import { requestOrigin, requestPath, requestQuery } from '../request-url.js';

export interface PageEnvelope<T> {
  content: T[];
  totalElements: number;
  totalPages: number;
  number: number;
  size: number;
  first: boolean;
  last: boolean;
}

export function toPageEnvelope<T>(content: T[], total: number, page: number, size: number): PageEnvelope<T> {
  const totalPages = Math.ceil(total / size);
  return {
    content,
    totalElements: total,
    totalPages,
    number: page,
    size,
    first: page === 0,
    last: page + 1 >= totalPages,
  };
}

/** The query members that are not the list's identity: a cursor is bound to all the others. */
const PAGING_MEMBERS = new Set(['page', 'size', 'cursor']);

/** What a list route knows about cursors for one request: the seek asked for, and how to sign. */
export interface ListCursors {
  readonly seek: Seek | undefined;
  sign(page: number, size: number, key: RowKey, after: boolean): string;
}

const CURSOR_FORMAT = new RegExp(CURSOR_PATTERN);

/**
 * Reads and verifies the request's `cursor` (if any) for the list named `list`. Call it before
 * the service, and pass the result to paged().
 */
export async function listCursors(request: FastifyRequest, list: string): Promise<ListCursors> {
  const secret = await cursorSecret(request.server.db);
  const query = request.query as Record<string, unknown>;
  const identity = queryIdentity(list, query);
  const sign = (page: number, size: number, key: RowKey, after: boolean) => {
    const payload = Buffer.from(JSON.stringify([1, identity, page, size, after ? 1 : 0, key.value, key.id])).toString(
      'base64url',
    );
    return `${payload}.${mac(secret, payload).toString('base64url')}`;
  };
  const cursor = query.cursor;
  if (typeof cursor !== 'string') return { seek: undefined, sign };

  const invalid = (message: string) =>
    new InvalidFields([{ field: 'cursor', message, rejected: cursor }], 'The cursor is not valid for this request.');
  const [payload = '', signature = ''] = cursor.split('.');
  const expected = mac(secret, payload);
  const given = Buffer.from(signature, 'base64url');
  if (!CURSOR_FORMAT.test(cursor) || given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw invalid('is not a valid cursor: use the one in the Link header as it is');
  }
  const fields = parseSigned(payload);
  if (fields === undefined) throw invalid('is not a valid cursor: use the one in the Link header as it is');
  const [, boundTo, page, size, after, value, id] = fields;
  if (boundTo !== identity) throw invalid('belongs to another list, sort or filter');
  if (page !== query.page || size !== Math.min(Number(query.size), MAX_PAGE_SIZE)) {
    throw invalid('belongs to another page or page size');
  }
  return { seek: { after: after === 1, value, id }, sign };
}

type CursorFields = [1, string, number, number, 0 | 1, string, number];

/** The payload's members, typed; undefined if it is not what sign() writes (a key changed). */
function parseSigned(payload: string): CursorFields | undefined {
  try {
    const f: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (
      Array.isArray(f) &&
      f.length === 7 &&
      f[0] === 1 &&
      typeof f[1] === 'string' &&
      Number.isSafeInteger(f[2]) &&
      Number.isSafeInteger(f[3]) &&
      (f[4] === 0 || f[4] === 1) &&
      typeof f[5] === 'string' &&
      Number.isSafeInteger(f[6])
    ) {
      return f as CursorFields;
    }
  } catch {
    // not JSON: falls through
  }
  return undefined;
}

function mac(secret: Buffer, payload: string): Buffer {
  return createHmac('sha256', secret).update(`list-cursor:${payload}`).digest().subarray(0, 16);
}

/** The list and its query without the paging members, hashed: what a cursor is bound to. */
function queryIdentity(list: string, query: Record<string, unknown>): string {
  const members = Object.keys(query)
    .filter((k) => !PAGING_MEMBERS.has(k))
    .sort()
    .map((k) => [k, String(query[k])]);
  return createHash('sha256')
    .update(JSON.stringify([list, members]))
    .digest('base64url')
    .slice(0, 16);
}

const secrets = new WeakMap<Db, Promise<Buffer>>();

/** The signing key, read from the database once per process (and again after a failure). */
function cursorSecret(db: Db): Promise<Buffer> {
  let secret = secrets.get(db);
  if (secret === undefined) {
    secret = loadCursorSecret(db);
    secrets.set(db, secret);
    secret.catch(() => secrets.delete(db));
  }
  return secret;
}

/** Sets X-Total-Count and Link on the reply and returns the envelope to send. */
export function paged<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  result: PageOf<T>,
  cursors?: ListCursors,
): PageEnvelope<T> {
  const envelope = toPageEnvelope(result.content, result.total, result.page, result.size);
  const base = `${requestOrigin(request)}${requestPath(request)}`;
  const query = new URLSearchParams(requestQuery(request));
  query.set('size', String(envelope.size));
  const link = (page: number, rel: string, cursor?: string) => {
    query.set('page', String(page));
    if (cursor === undefined) query.delete('cursor');
    else query.set('cursor', cursor);
    return `<${base}?${query.toString()}>; rel="${rel}"`;
  };
  const lastPage = Math.max(envelope.totalPages - 1, 0);
  const edges = result.edges;
  const links = [link(0, 'first')];
  if (envelope.number > 0) {
    const prev = Math.min(envelope.number - 1, lastPage);
    // From an empty page past the end there is no row to seek before: the page by number.
    const cursor =
      edges && cursors && prev === envelope.number - 1
        ? cursors.sign(prev, envelope.size, edges.first, false)
        : undefined;
    links.push(link(prev, 'prev', cursor));
  }
  if (envelope.number < lastPage) {
    const cursor = edges && cursors ? cursors.sign(envelope.number + 1, envelope.size, edges.last, true) : undefined;
    links.push(link(envelope.number + 1, 'next', cursor));
  }
  links.push(link(lastPage, 'last'));
  reply.header('x-total-count', String(envelope.totalElements)).header('link', links.join(', '));
  return envelope;
}
