// OpenAPI 3.1, generated from the same TypeBox schemas that validate and serialize.
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import {
  corsHeaders,
  decimalPlacesInWords,
  declareTags,
  emptyBodiesOptional,
  headersAsComponents,
  integerFormats,
  noContentWithoutBody,
  operationIdsAndDescriptions,
  parametersWithDefaultsOptional,
  problemResponsesAsComponents,
  schemasAsComponents,
  standardProblemResponses,
  unversionedPaths,
  type Document,
} from './document.js';
import { ProblemSchema } from '../schemas.js';
import { SUPPORTED_VERSIONS, vendorMediaType } from '../versioning/versioning.js';

// The document is plain JSON: TypeBox's schema type is one JSON object among the others there.
const PROBLEM_CONTENT = { 'application/problem+json': { schema: ProblemSchema as unknown as Record<string, unknown> } };

const RATE_LIMIT_HEADERS = {
  RateLimit: {
    description:
      'Remaining quota and seconds until the window resets (IETF RateLimit fields), e.g. `"default";r=599;t=42`',
    schema: { type: 'string', maxLength: 64, pattern: '^"default";r=\\d+;t=\\d+$' },
  },
  'RateLimit-Policy': {
    description: 'The quota: requests (q) per window of w seconds, e.g. `"default";q=600;w=60`',
    schema: { type: 'string', maxLength: 64, pattern: '^"default";q=\\d+;w=\\d+$' },
  },
};

/**
 * docs/api-guide.md#rate-limits: every operation except the health probes may answer 429 (quota used up, with
 * Retry-After), and its answers carry the RateLimit fields.
 */
export function addRateLimitResponses(document: Document): void {
  for (const [path, methods] of Object.entries(document.paths ?? {})) {
    if (path.startsWith('/api/public/health/')) continue;
    for (const operation of Object.values(methods)) {
      const responses = (operation.responses ??= {});
      for (const response of Object.values(responses))
        response.headers = { ...RATE_LIMIT_HEADERS, ...response.headers };
      responses['429'] ??= {
        description: 'Too Many Requests: the quota is used up (problem document)',
        headers: {
          'Retry-After': {
            description: 'Seconds until the quota resets',
            schema: { type: 'integer', minimum: 1, maximum: 60 },
          },
          ...RATE_LIMIT_HEADERS,
        },
        content: PROBLEM_CONTENT,
      };
    }
  }
}

/**
 * docs/api-guide.md#safe-retries, which the route schemas cannot say: Idempotency-Key on every POST and PATCH (and
 * the 409 and 422 it can cause, and Idempotent-Replayed on a replay); If-Match where a stale
 * version answers 412, If-None-Match where a current one answers 304, and ETag on their 2xx.
 */
export function addRetryAndPreconditionDocs(document: Document): void {
  for (const methods of Object.values(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(methods)) {
      const responses = (operation.responses ??= {});
      const parameters = (operation.parameters ??= []);
      const versioned = responses['304'] !== undefined || responses['412'] !== undefined;
      if (responses['412'] !== undefined)
        parameters.push({
          in: 'header',
          name: 'If-Match',
          required: false,
          description:
            'Apply only if the resource is at one of these versions (its ETag, e.g. `"3"`), or `*` for any; otherwise 412 with the current ETag.',
          schema: { type: 'string', maxLength: 1024 },
        });
      if (responses['304'] !== undefined)
        parameters.push({
          in: 'header',
          name: 'If-None-Match',
          required: false,
          description: 'The ETag(s) of the copy the client holds; 304 without a body when one is current.',
          schema: { type: 'string', maxLength: 1024 },
        });
      if (versioned)
        for (const [status, response] of Object.entries(responses))
          if (/^2\d\d$/.test(status))
            response.headers = {
              ETag: {
                description: 'The resource’s version, e.g. `"3"`',
                schema: { type: 'string', maxLength: 18, pattern: '^"[0-9]+"$' },
              },
              ...response.headers,
            };
      if (method !== 'post' && method !== 'patch') continue;
      parameters.push({
        in: 'header',
        name: 'Idempotency-Key',
        required: false,
        description:
          'Makes a retry safe (IETF draft-ietf-httpapi-idempotency-key-header): a retry with the same key and body gets the first answer again, with `Idempotent-Replayed: true`, for IDEMPOTENCY_TTL_HOURS (24). ' +
          'A string (`"…"`) or a bare token of 1–255 visible ASCII characters without `"` or `\\`; keys are per caller.',
        schema: { type: 'string', minLength: 1, maxLength: 257, pattern: '^"?[\\x21\\x23-\\x5b\\x5d-\\x7e]{1,255}"?$' },
        example: '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
      });
      responses['409'] ??= {
        description: 'Conflict: a request with the same Idempotency-Key is still in progress (retry after Retry-After)',
        content: PROBLEM_CONTENT,
      };
      responses['409'].headers = {
        'Retry-After': {
          description: 'Seconds to wait when the key is in use',
          schema: { type: 'integer', minimum: 1, maximum: 1 },
        },
        ...responses['409'].headers,
      };
      responses['422'] ??= {
        description: 'Unprocessable Content: the Idempotency-Key was already used for a different request',
        content: PROBLEM_CONTENT,
      };
      for (const [status, response] of Object.entries(responses))
        if (/^2\d\d$/.test(status) || status === '409' || status === '422')
          response.headers = {
            ...response.headers,
            'Idempotent-Replayed': {
              description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key',
              schema: { type: 'string', enum: ['true'] },
            },
          };
    }
  }
}

/**
 * docs/lists.md: every page answer carries X-Total-Count and Link; the route
 * schemas describe only the body. A page's schema is titled `…Page` (http/schemas.ts Page()).
 */
export function addPageHeaders(document: Document): void {
  for (const methods of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(methods)) {
      const ok = operation.responses?.['200'];
      const title = (ok?.content?.['application/json']?.schema as { title?: string } | undefined)?.title;
      if (ok === undefined || title === undefined || !/Page(V\d+)?$/.test(title)) continue;
      const cursors = (operation.parameters ?? []).some((p) => 'name' in p && p.name === 'cursor');
      ok.headers = {
        ...ok.headers,
        'X-Total-Count': {
          description: 'The number of elements in the whole list under the filters (exact), as totalElements',
          schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
        },
        Link: {
          description:
            'RFC 8288 links to the first, prev, next and last pages (prev and next where they exist), keeping size, sort and filters' +
            (cursors ? '; prev and next carry a `cursor`: follow them to page by keyset seek at any depth' : ''),
          schema: { type: 'string', maxLength: 16384 },
        },
      };
    }
  }
}

/**
 * Each versioned success response is also available as its vendor media type,
 * application/vnd.<vendor>.v<N>+json; the document says so next to application/json.
 */
export function addVendorMediaTypes(document: Document, vendor: string): void {
  for (const [path, methods] of Object.entries(document.paths ?? {})) {
    const version = /^\/api\/v(\d+)\//.exec(path)?.[1];
    if (version === undefined) continue;
    for (const operation of Object.values(methods)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const { content } = response;
        const json = content?.['application/json'];
        if (/^2\d\d$/.test(status) && content !== undefined && json !== undefined)
          content[vendorMediaType(vendor, Number(version))] = json;
      }
    }
  }
}

const TAGS: Record<string, string> = {
  'users (v1)': 'Users, version 1: name and e-mail',
  'users (v2)': 'Users, version 2: v1 plus age and address',
  'orders (v1)': 'Orders, version 1, with their action sub-resources',
  'orders (v2)': 'Orders, version 2: several items and a shipping address per order',
  products: 'Products: cacheable reads with ETag and Cache-Control; no version segment',
  stock: 'Stock per product: available and reserved units',
  users: 'Users at /api/users/**, in the version X-API-Version or Accept chooses',
  orders: 'Orders at /api/orders/**, in the version X-API-Version or Accept chooses',
  webhooks:
    'Webhook subscriptions (docs/webhooks.md, administrators): signed deliveries of user and order events, Standard Webhooks format',
  events:
    'The live event stream (docs/webhooks.md): Server-Sent Events of the user and order events the caller may read, resumable with Last-Event-ID',
  health: 'Liveness and readiness probes (no authentication, not rate limited)',
  problems: 'The pages that the typed problem documents’ `type` URIs point to (no authentication)',
};

/** The passes every operation needs (document.ts), in an order that lets each see the last. */
function finishDocument(document: Document): void {
  parametersWithDefaultsOptional(document);
  noContentWithoutBody(document);
  emptyBodiesOptional(document);
  decimalPlacesInWords(document);
  corsHeaders(document);
  operationIdsAndDescriptions(document);
  declareTags(document, TAGS);
  schemasAsComponents(document);
  headersAsComponents(document);
  integerFormats(document);
  problemResponsesAsComponents(document);
}

export interface OpenApiOptions {
  /**
   * Adds what the routes cannot say to the finished document: the `webhooks` section, which the
   * webhooks folder owns (app.ts passes it; the framework imports no resource).
   */
  extend?: ((document: Record<string, unknown>) => void)[];
}

async function openapi(app: FastifyInstance, { extend = [] }: OpenApiOptions): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Resource API',
        version: '1.0.0',
        description: [
          'Users, orders, products and stock over JSON/HTTP. Every failure is an RFC 9457 problem document (application/problem+json). ' +
            'Every path outside /api/public/ requires a Bearer token.',
          '',
          `Versions (${SUPPORTED_VERSIONS.map((v) => `v${v}`).join(', ')}): the version is the second path segment (/api/v1/users, /api/v2/orders). ` +
            'The same resources without it (`/api/users/…`, `/api/orders/…`) take the version from the `X-API-Version` header (1 or 2) ' +
            `or from \`Accept: ${vendorMediaType(app.config.apiVendor, 2).replace('v2', 'vN')}\` (N = 1 or 2), and v1 when neither is sent; ` +
            'they answer with Vary: Accept, X-API-Version and, when Accept named it, the vendor media type. An unknown version is 400 (header) or 406 (Accept). ' +
            'Products and stock carry no version segment.',
        ].join('\n'),
      },
      // x-internal: false tells API inventories (OWASP API9) that this server is the public one.
      servers: [
        {
          url: app.config.baseUrl,
          description: `This instance (BASE_URL), ${app.config.env === 'production' ? 'production' : 'local development'} environment`,
          'x-internal': false,
        } as never,
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              'A JWT in `Authorization: Bearer <token>`, verified as RFC8725 (JSON Web Token Best Current Practices) asks: ' +
              'the algorithm is fixed by the configured key (HS256 with JWT_SECRET, or the asymmetric algorithm of JWT_PUBLIC_KEY ' +
              'or the JWKS at JWT_JWKS_URL), never taken from the token, and `none` is refused; `exp` and `sub` are required, `iss` and `aud` ' +
              'are checked when configured. The `scope` claim lists the scopes (users:read, users:write, orders:read, ' +
              'orders:write, products:read, products:write, webhooks:read, webhooks:write, admin); `sub` is the caller’s user id.',
          },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    // Routes registered with hide (the docs page's own assets) stay out of the document.
    hideUntagged: false,
    // A collection is /api/v1/users in the document, not /api/v1/users/ (both are served).
    transform: ({ schema, url }) => ({ schema, url: url.length > 1 ? url.replace(/\/$/, '') : url }),
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject; // not used: OpenAPI 3.1 only
      const document = documentObject.openapiObject as Document;
      addPageHeaders(document);
      addVendorMediaTypes(document, app.config.apiVendor);
      addRetryAndPreconditionDocs(document);
      // Answers every operation can give first, so that the rate-limit fields reach them too.
      standardProblemResponses(document);
      addRateLimitResponses(document);
      unversionedPaths(document, SUPPORTED_VERSIONS, app.config.apiVendor);
      finishDocument(document);
      for (const add of extend) add(document as unknown as Record<string, unknown>);
      return documentObject.openapiObject;
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/api/public/docs',
    uiConfig: { deepLinking: true },
    staticCSP: true,
  });
}

export default fp(openapi, { name: 'openapi', dependencies: ['problems'] });
