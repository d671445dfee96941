// A CLIENT span per database statement, called by both dialects (db/postgres-js-dialect.ts,
// db/pglite-dialect.ts): no library instruments postgres.js or PGlite. Only beneath a span (a
// request, a webhook delivery): the dispatcher's polls and the background purges start no
// trace of their own. The span says the operation, never the statement's text (behind a
// transaction pooler the parameters are inlined into it) or a parameter.
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { tracer } from './tracing.js';

/** The statement's first keyword, upper-cased: SELECT, INSERT, WITH, BEGIN… */
export function operationOf(sql: string): string {
  const match = /^\s*([A-Za-z]+)/.exec(sql);
  return match?.[1] === undefined ? 'QUERY' : match[1].toUpperCase();
}

/** Runs `run` (one statement) inside a CLIENT span when tracing is on and a span is active. */
export function traceStatement<T>(sql: string, run: () => Promise<T>): Promise<T> {
  const t = tracer();
  if (t === undefined) return run();
  const parent = context.active();
  if (trace.getSpan(parent) === undefined) return run();
  const operation = operationOf(sql);
  const span = t.startSpan(
    operation,
    {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system': 'postgresql', 'db.system.name': 'postgresql', 'db.operation.name': operation },
    },
    parent,
  );
  return run().then(
    (result) => {
      span.end();
      return result;
    },
    (error: unknown) => {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
      span.setAttribute(
        'error.type',
        error instanceof Error ? ((error as { code?: string }).code ?? error.name) : 'error',
      );
      span.end();
      throw error;
    },
  );
}
