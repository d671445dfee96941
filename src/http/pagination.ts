// The page envelope (spec 2.4) and its headers: X-Total-Count and an RFC 8288 Link with
// first/last always and prev/next where they exist, each keeping size, sort and filters.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { requestOrigin, requestPath, requestQuery } from './request-url.js';

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

/** Sets X-Total-Count and Link on the reply and returns the envelope to send. */
export function paged<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  result: { content: T[]; total: number; page: number; size: number },
): PageEnvelope<T> {
  const envelope = toPageEnvelope(result.content, result.total, result.page, result.size);
  const base = `${requestOrigin(request)}${requestPath(request)}`;
  const query = new URLSearchParams(requestQuery(request));
  query.set('size', String(envelope.size));
  const link = (page: number, rel: string) => {
    query.set('page', String(page));
    return `<${base}?${query.toString()}>; rel="${rel}"`;
  };
  const lastPage = Math.max(envelope.totalPages - 1, 0);
  const links = [link(0, 'first')];
  if (envelope.number > 0) links.push(link(Math.min(envelope.number - 1, lastPage), 'prev'));
  if (envelope.number < lastPage) links.push(link(envelope.number + 1, 'next'));
  links.push(link(lastPage, 'last'));
  reply.header('x-total-count', String(envelope.totalElements)).header('link', links.join(', '));
  return envelope;
}
