// OpenAPI 3.1, generated from the same TypeBox schemas that validate and serialize.
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ProblemSchema } from './schemas.js';
import { SUPPORTED_VERSIONS, vendorMediaType } from './versioning.js';

interface Operation {
  responses?: Record<
    string,
    { description?: string; content?: Record<string, unknown>; headers?: Record<string, unknown> }
  >;
}

const RATE_LIMIT_HEADERS = {
  RateLimit: {
    description:
      'Remaining quota and seconds until the window resets (IETF RateLimit fields), e.g. `"default";r=599;t=42`',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description: 'The quota: requests (q) per window of w seconds, e.g. `"default";q=600;w=60`',
    schema: { type: 'string' },
  },
};

/**
 * DESIGN §11: every operation except the health probes may answer 429 (quota used up, with
 * Retry-After), and its answers carry the RateLimit fields.
 */
export function addRateLimitResponses(document: { paths?: Record<string, Record<string, Operation>> }): void {
  for (const [path, methods] of Object.entries(document.paths ?? {})) {
    if (path.startsWith('/api/public/health/')) continue;
    for (const operation of Object.values(methods)) {
      const responses = (operation.responses ??= {});
      for (const response of Object.values(responses))
        response.headers = { ...RATE_LIMIT_HEADERS, ...response.headers };
      responses['429'] ??= {
        description: 'Too Many Requests: the quota is used up (problem document)',
        headers: {
          'Retry-After': { description: 'Seconds until the quota resets', schema: { type: 'integer', minimum: 1 } },
          ...RATE_LIMIT_HEADERS,
        },
        content: { 'application/problem+json': { schema: ProblemSchema } },
      };
    }
  }
}

/**
 * spec 9.2: each versioned success response is also available as its vendor media type,
 * application/vnd.<vendor>.v<N>+json; the document says so next to application/json.
 */
export function addVendorMediaTypes(
  document: { paths?: Record<string, Record<string, Operation>> },
  vendor: string,
): void {
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

async function openapi(app: FastifyInstance): Promise<void> {
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
      servers: [{ url: app.config.baseUrl }],
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      },
      security: [{ bearerAuth: [] }],
    },
    // Routes registered with hide (the docs page's own assets) stay out of the document.
    hideUntagged: false,
    // A collection is /api/v1/users in the document, not /api/v1/users/ (both are served).
    transform: ({ schema, url }) => ({ schema, url: url.length > 1 ? url.replace(/\/$/, '') : url }),
    transformObject: (documentObject) => {
      const document = (documentObject as { openapiObject: Parameters<typeof addVendorMediaTypes>[0] }).openapiObject;
      addVendorMediaTypes(document, app.config.apiVendor);
      addRateLimitResponses(document);
      return document;
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/api/public/docs',
    uiConfig: { deepLinking: true },
    staticCSP: true,
  });
}

export default fp(openapi, { name: 'openapi', dependencies: ['problems'] });
