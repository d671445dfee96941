// /api/public/problems/{slug}: a human-readable page for each typed problem (docs/operations.md#running-several-instances), so
// that a problem's type URI leads somewhere useful.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { PROBLEM_TYPES } from '../http/problems/problem-types.js';
import { problemResponses } from '../http/schemas.js';

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(slug: string, title: string, status: number, description: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}</style>
</head><body>
<h1>${escape(title)}</h1>
<p>HTTP status <code>${status}</code>, problem type <code>${escape(slug)}</code>.</p>
<p>${escape(description)}</p>
<p>Problems are sent as <code>application/problem+json</code> (RFC 9457) with the members <code>type</code>, <code>title</code>, <code>status</code>, <code>detail</code> and <code>instance</code>.</p>
</body></html>`;
}

const problemPages: FastifyPluginAsyncTypebox = async (app) => {
  const pages = new Map(
    Object.entries(PROBLEM_TYPES).map(([slug, t]) => [slug, page(slug, t.title, t.status, t.description)]),
  );
  app.get('/:slug', {
    schema: {
      tags: ['problems'],
      summary: 'Describe a problem type',
      security: [],
      params: Type.Object({ slug: Type.String({ maxLength: 64 }) }),
      response: {
        200: {
          description: 'An HTML page describing the problem type',
          content: { 'text/html': { schema: Type.String({ maxLength: 65_536 }) } },
        },
        ...problemResponses(404),
      },
    },
    config: { produces: ['text/html'] },
    handler: async (request, reply) => {
      const html = pages.get(request.params.slug);
      if (html === undefined) {
        reply.callNotFound();
        return reply;
      }
      return reply.type('text/html; charset=utf-8').header('cache-control', 'public, max-age=86400').send(html);
    },
  });
};

export default problemPages;
