// API versions (docs/api-guide.md#versions). The version is the path's second segment; the same
// resources without it (/api/users/**, /api/orders/**) take it from X-API-Version or from
// Accept: application/vnd.<vendor>.v<N>+json, v1 when neither is sent.
//
// One mechanism: Fastify's rewriteUrl (before routing) sends an unversioned request to the
// versioned route, so scopes, ownership, validation and problem forms are those of that
// version's routes by construction. The decision is stashed on the raw request; the plugin
// below turns a refused one into 400/406 and sets Vary and the negotiated media type.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { plain } from '../problems/to-problem.js';
import { sendProblem } from '../problems/error-handler.js';
import { appendVary } from '../cors.js';
import { withoutQuery } from '../request-url.js';

export const SUPPORTED_VERSIONS = [1, 2] as const;

/** The resources that exist in more than one version (docs/api-guide.md#versions). */
const VERSIONED = /^\/api\/(?:v(\d+)\/)?(users|orders)(?=\/|$|\?)/;

export interface Negotiation {
  /** The URL to route: the request's own, or the versioned one for an unversioned path. */
  url: string;
  version: number;
  /** The path had no version segment: the answer varies with Accept and X-API-Version. */
  unversioned: boolean;
  /** The vendor media type the client asked for, to answer with. */
  mediaType?: string;
  error?: { status: 400 | 406; detail: string };
}

export function vendorMediaType(vendor: string, version: number): string {
  return `application/vnd.${vendor}.v${version}+json`;
}

const vendorPatterns = new Map<string, RegExp>();

/** The vendor versions Accept names, most preferred first (q-values honoured, q=0 ignored). */
export function acceptedVersions(accept: string | undefined, vendor: string): number[] {
  if (accept === undefined) return [];
  let pattern = vendorPatterns.get(vendor);
  if (pattern === undefined) {
    pattern = new RegExp(
      `^application/vnd\\.${vendor.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.v(\\d{1,4})\\+json$`,
      'i',
    );
    vendorPatterns.set(vendor, pattern);
  }
  const found: { version: number; q: number; index: number }[] = [];
  accept.split(',').forEach((range, index) => {
    const [type, ...params] = range.split(';').map((p) => p.trim());
    const m = pattern.exec(type ?? '');
    if (m === null) return;
    const qParam = params.find((p) => /^q=/i.test(p));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!(q > 0)) return;
    found.push({ version: Number(m[1]), q, index });
  });
  return found.sort((a, b) => b.q - a.q || a.index - b.index).map((f) => f.version);
}

const supported = (v: number) => (SUPPORTED_VERSIONS as readonly number[]).includes(v);
const SUPPORTED_TEXT = SUPPORTED_VERSIONS.join(', ');

/** Decides the version of one request. Pure; unit-tested for every combination. */
export function negotiate(
  url: string,
  headers: { 'x-api-version'?: string | string[] | undefined; accept?: string | undefined },
  vendor: string,
): Negotiation | undefined {
  const m = VERSIONED.exec(url);
  if (m === null) return undefined;
  const pathVersion = m[1] === undefined ? undefined : Number(m[1]);
  const rawHeader = Array.isArray(headers['x-api-version']) ? headers['x-api-version'][0] : headers['x-api-version'];
  const header = rawHeader?.trim();
  const accepted = acceptedVersions(headers.accept, vendor);

  let error: Negotiation['error'];
  let headerVersion: number | undefined;
  if (header !== undefined && header !== '') {
    headerVersion = /^\d{1,4}$/.test(header) ? Number(header) : NaN;
    if (!supported(headerVersion))
      error = {
        status: 400,
        detail: `X-API-Version ${JSON.stringify(header)} is not a supported version; supported: ${SUPPORTED_TEXT}.`,
      };
  }
  const acceptable = accepted.filter(supported);
  if (error === undefined && accepted.length > 0 && acceptable.length === 0) {
    error = {
      status: 406,
      detail: `Accept names no supported version of ${vendorMediaType(vendor, 0).replace('v0', 'v<N>')}; supported: ${SUPPORTED_TEXT}.`,
    };
  }

  let version: number;
  if (pathVersion !== undefined) {
    version = pathVersion;
    if (error === undefined && headerVersion !== undefined && headerVersion !== pathVersion) {
      error = {
        status: 400,
        detail: `X-API-Version ${headerVersion} conflicts with the path's version v${pathVersion}.`,
      };
    }
    if (error === undefined && acceptable.length > 0 && !acceptable.includes(pathVersion)) {
      error = {
        status: 406,
        detail: `Accept asks for ${acceptable.map((v) => vendorMediaType(vendor, v)).join(', ')}, but the path is v${pathVersion}.`,
      };
    }
  } else {
    version = headerVersion !== undefined && supported(headerVersion) ? headerVersion : (acceptable[0] ?? 1);
    if (
      error === undefined &&
      headerVersion !== undefined &&
      acceptable.length > 0 &&
      !acceptable.includes(headerVersion)
    ) {
      error = {
        status: 406,
        detail: `Accept asks for ${acceptable.map((v) => vendorMediaType(vendor, v)).join(', ')}, but X-API-Version is ${headerVersion}.`,
      };
    }
  }
  const mediaType = acceptable.includes(version) ? vendorMediaType(vendor, version) : undefined;
  const rewritten = pathVersion === undefined ? url.replace(/^\/api\//, `/api/v${version}/`) : url;
  return {
    url: rewritten,
    version,
    unversioned: pathVersion === undefined,
    ...(mediaType ? { mediaType } : {}),
    ...(error ? { error } : {}),
  };
}

const kNegotiation = Symbol('negotiation');
const VERSIONED_PATH = /^\/api\/v\d+\/(?:users|orders)(?=\/|$|\?)/;
const VENDOR_TYPE = /vnd\./i;
type NegotiatedRequest = IncomingMessage & { [kNegotiation]?: Negotiation };

/** Fastify's rewriteUrl: decides before routing, and routes an unversioned path to its version. */
export function versionRewriter(vendor: string): (req: IncomingMessage) => string {
  return (req) => {
    const url = req.url ?? '/';
    // The common case: a path that names its version, and neither X-API-Version nor a vendor
    // type in Accept. There is nothing to decide, check or answer with (negotiate() agrees).
    const { accept } = req.headers;
    if (
      req.headers['x-api-version'] === undefined &&
      (accept === undefined || !VENDOR_TYPE.test(accept)) &&
      VERSIONED_PATH.test(url)
    )
      return url;
    const negotiation = negotiate(url, req.headers, vendor);
    if (negotiation === undefined) return url;
    (req as NegotiatedRequest)[kNegotiation] = negotiation;
    return negotiation.url;
  };
}

async function versioning(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', (request, reply, done) => {
    const negotiation = (request.raw as NegotiatedRequest)[kNegotiation];
    if (negotiation === undefined) return done();
    if (negotiation.unversioned) appendVary(reply, 'Accept', 'X-API-Version');
    if (negotiation.error === undefined) return done();
    const { status, detail } = negotiation.error;
    sendProblem(reply, plain(status, detail, { instance: withoutQuery(request.originalUrl) }));
  });
  // The negotiated vendor type names a successful JSON answer; problems keep theirs.
  app.addHook('onSend', (request, reply, payload, done) => {
    const mediaType = (request.raw as NegotiatedRequest)[kNegotiation]?.mediaType;
    if (mediaType !== undefined && String(reply.getHeader('content-type') ?? '').startsWith('application/json'))
      reply.type(mediaType);
    done(null, payload);
  });
}

export default fp(versioning, { name: 'versioning', dependencies: ['problems'] });
