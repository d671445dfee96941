// Absolute URLs built from the incoming request (docs/api-guide.md#users): scheme, host,
// port and prefix as the client saw them, from X-Forwarded-* only when TRUST_PROXY is on.
import type { FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';

const DEFAULT_PORTS: Record<string, string> = { http: '80', https: '443' };

function first(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  const head = v?.split(',')[0]?.trim();
  return head === '' ? undefined : head;
}

/** `<scheme>://<host>[:<port>]<prefix>` of the request as the client addressed it. */
export function requestOrigin(request: FastifyRequest): string {
  const h = request.headers;
  const encrypted = (request.raw.socket as { encrypted?: boolean }).encrypted === true;
  let scheme = encrypted ? 'https' : 'http';
  let host = h.host ?? 'localhost';
  let prefix = '';
  if (fromTrustedProxy(request)) {
    const proto = first(h['x-forwarded-proto'])?.toLowerCase();
    if (proto === 'http' || proto === 'https') scheme = proto;
    host = first(h['x-forwarded-host']) ?? host;
    const port = first(h['x-forwarded-port']);
    if (port !== undefined && /^\d{1,5}$/.test(port)) host = `${stripPort(host)}:${port}`;
    const forwardedPrefix = first(h['x-forwarded-prefix']);
    if (forwardedPrefix !== undefined && /^\/[\w\-./~%]*$/.test(forwardedPrefix))
      prefix = forwardedPrefix.replace(/\/+$/, '');
  }
  // Leave the default port out, as browsers and proxies do.
  const port = /:(\d+)$/.exec(host)?.[1];
  if (port !== undefined && DEFAULT_PORTS[scheme] === port) host = stripPort(host);
  return `${scheme}://${host}${prefix}`;
}

/**
 * Whether the request's X-Forwarded-* headers come from a proxy the operator named: any peer
 * when TRUST_PROXY counts hops, a listed address otherwise (never with TRUST_PROXY=false).
 */
function fromTrustedProxy(request: FastifyRequest): boolean {
  const trust = request.server.config.trustProxy;
  if (trust === false) return false;
  if (typeof trust === 'number') return true;
  return isListed(request.raw.socket.remoteAddress ?? '', trust);
}

const listCache = new WeakMap<readonly string[], ((address: string) => boolean)[]>();

function isListed(address: string, list: readonly string[]): boolean {
  let matchers = listCache.get(list);
  if (matchers === undefined) {
    matchers = list.map((entry) => {
      const [range, bits] = entry.includes('/') ? ipaddr.parseCIDR(entry) : [ipaddr.parse(entry), undefined];
      return (candidate: string) => {
        if (!ipaddr.isValid(candidate)) return false;
        let parsed = ipaddr.parse(candidate);
        if (parsed.kind() !== range.kind() && parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress())
          parsed = (parsed as ipaddr.IPv6).toIPv4Address();
        if (parsed.kind() !== range.kind()) return false;
        return bits === undefined ? parsed.toString() === range.toString() : parsed.match(range, bits);
      };
    });
    listCache.set(list, matchers);
  }
  return matchers.some((matches) => matches(address));
}

function stripPort(host: string): string {
  return host.replace(/:\d+$/, '');
}

/** A URL's path: everything before the '?'. */
export function withoutQuery(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** The request path as the client sent it (before any version rewrite), without its query. */
export function requestPath(request: FastifyRequest): string {
  return withoutQuery(request.originalUrl);
}

/** The query string as the client sent it, without the '?'. */
export function requestQuery(request: FastifyRequest): string {
  const url = request.originalUrl;
  const q = url.indexOf('?');
  return q === -1 ? '' : url.slice(q + 1);
}

/** The request URL followed by /{id}. */
export function createdLocation(request: FastifyRequest, id: number | string): string {
  return `${requestOrigin(request)}${requestPath(request).replace(/\/+$/, '')}/${id}`;
}
