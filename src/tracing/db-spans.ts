// A CLIENT span per database statement, called by both dialects (db/postgres-js-dialect.ts,
// db/pglite-dialect.ts): no library instruments postgres.js or PGlite. Only beneath a request's
// span: the dispatcher's polls and the background purges start no trace of their own. The span
// says the operation, never the statement's text (behind a transaction pooler the parameters
// are inlined into it) or a parameter.
//
// The parent travels with the database handle, not in an async context: a sampled request's
// `request.db` is the database with a StatementParent plugin (tracedDb), which names the span of
// each query it compiles, and a transaction opened on it keeps the plugin. OpenTelemetry's
// context rides on AsyncLocalStorage, which on Node 20 and 22 makes every promise of the
// process dearer once entered (docs/tracing.md); nothing here enters it.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';
import { tracer } from './tracing.js';

/** The span each compiled query belongs to, by its query id (the object Kysely hands both). */
const parents = new WeakMap<object, Span>();

/** Names the span of every query compiled through the handle that carries it. */
class StatementParent implements KyselyPlugin {
  constructor(readonly span: Span) {}
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    parents.set(args.queryId, this.span);
    return args.node;
  }
  transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(args.result);
  }
}

/** A Kysely handle (a database or a transaction), as far as this file needs one. */
interface Handle {
  withPlugin(plugin: KyselyPlugin): unknown;
  getExecutor(): { readonly plugins: readonly KyselyPlugin[] };
}

/** What a traced handle was made from: the handle itself, and the span. */
const traced = new WeakMap<object, { base: object; span: Span }>();

/** `db`, with each statement sent through it (and its transactions) traced beneath `span`. */
export function tracedDb<T extends Handle>(db: T, span: Span): T {
  if (spanOfDb(db) !== undefined) return db; // a transaction opened on a traced handle
  const handle = db.withPlugin(new StatementParent(span)) as T;
  traced.set(handle, { base: db, span });
  return handle;
}

/** The span a handle's statements belong to; undefined when it is not traced. */
export function spanOfDb(db: Pick<Handle, 'getExecutor'>): Span | undefined {
  if (tracer() === undefined) return undefined;
  const known = traced.get(db);
  if (known !== undefined) return known.span;
  for (const plugin of db.getExecutor().plugins) if (plugin instanceof StatementParent) return plugin.span;
  return undefined;
}

/**
 * The handle a traced handle was made from, and its span (prepared queries run straight on the
 * base's driver, db/prepared.ts); undefined when `db` is not a tracedDb (nothing is allocated:
 * every order asks).
 */
export function untraced<T extends object>(db: T): { readonly base: T; readonly span: Span } | undefined {
  return traced.get(db) as { base: T; span: Span } | undefined;
}

/**
 * Names `db`'s span (if traced) as the parent of a query compiled without it (a prepared
 * query, run through `executeQuery` inside a transaction).
 */
export function adoptQuery(db: Pick<Handle, 'getExecutor'>, queryId: object): void {
  if (tracer() === undefined) return;
  const span = spanOfDb(db);
  if (span !== undefined) parents.set(queryId, span);
}

/** The span of a compiled query (its query id), when it was compiled through a traced handle. */
export function parentOfQuery(queryId: object | undefined): Span | undefined {
  return queryId === undefined ? undefined : parents.get(queryId);
}

/** The statement's first keyword, upper-cased: SELECT, INSERT, WITH, BEGIN… */
export function operationOf(sql: string): string {
  const match = /^\s*([A-Za-z]+)/.exec(sql);
  return match?.[1] === undefined ? 'QUERY' : match[1].toUpperCase();
}

const now = () => performance.timeOrigin + performance.now();

function fail(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
  span.setAttribute('error.type', error instanceof Error ? ((error as { code?: string }).code ?? error.name) : 'error');
}

/** Runs `run` (one statement) inside a CLIENT span beneath `parent` when there is one. */
export function traceStatement<T>(sql: string, run: () => Promise<T>, parent: Span | undefined): Promise<T> {
  if (parent === undefined) return run();
  const span = startStatement(parent, sql);
  if (span === undefined) return run();
  return run().then(
    (result) => {
      span.end();
      return result;
    },
    (error: unknown) => {
      fail(span, error);
      span.end();
      throw error;
    },
  );
}

/** A sampled request's read asked of a gathered statement (db/prepared.ts, prepareById). */
export interface GatheredRead {
  readonly id: number;
  /** The request's span. */
  readonly parent: Span;
  /** When it was asked (epoch ms, as span times). */
  readonly at: number;
}

/** A sampled request's read, asked now. */
export function gatheredRead(id: number, parent: Span): GatheredRead {
  return { id, parent, at: now() };
}

/**
 * A gathered statement that carries sampled reads: one CLIENT span for the statement, beneath
 * the request of the first sampled read it carried (with `db.operation.batch.size`, the reads
 * it carried, sampled or not, when more than one), as a statement of its own is. Every other
 * sampled request it served gets an INTERNAL span `gathered read` beneath its own span, from its
 * ask to its answer, linked to the statement's span: a trace viewer follows the link.
 */
export function traceGathered<T>(
  sql: string,
  reads: readonly GatheredRead[],
  size: number,
  run: () => Promise<T>,
): Promise<T> {
  const first = reads[0];
  const span = first === undefined ? undefined : startStatement(first.parent, sql);
  if (span === undefined) return run();
  if (size > 1) span.setAttribute('db.operation.batch.size', size);
  const settle = (error: unknown) => {
    if (error !== undefined) fail(span, error);
    span.end();
    if (reads.length === 1) return;
    const t = tracer();
    if (t === undefined) return;
    const links = [{ context: span.spanContext() }];
    for (let i = 1; i < reads.length; i++) {
      const read = reads[i] as GatheredRead;
      const wait = t.startSpan(
        'gathered read',
        { kind: SpanKind.INTERNAL, startTime: read.at, links, attributes: { 'db.system.name': 'postgresql' } },
        trace.setSpan(ROOT_CONTEXT, read.parent),
      );
      if (error !== undefined) fail(wait, error);
      wait.end();
    }
  };
  return run().then(
    (result) => {
      settle(undefined);
      return result;
    },
    (error: unknown) => {
      settle(error ?? new Error('failed'));
      throw error;
    },
  );
}

/**
 * The spans of one connection's statements. A transaction's BEGIN is sent before any of its
 * queries names a parent: its times are kept, and its span is written beneath the parent of the
 * first traced statement that follows; COMMIT and ROLLBACK go beneath the same parent.
 */
export class ConnectionSpans {
  #parent: Span | undefined;
  #begin: { sql: string; start: number; end: number } | undefined;

  /** A statement of a compiled query (its query id names its span's parent, if any). */
  statement<T>(sql: string, run: () => Promise<T>, queryId: object | undefined): Promise<T> {
    if (tracer() === undefined) return run();
    const parent = parentOfQuery(queryId) ?? this.#parent;
    if (parent !== undefined && this.#begin !== undefined) this.#writeBegin(parent);
    if (parent !== undefined) this.#parent = parent;
    return traceStatement(sql, run, parent);
  }

  /** BEGIN: timed now, traced once its transaction's parent is known. */
  async begin<T>(sql: string, run: () => Promise<T>): Promise<T> {
    if (tracer() === undefined) return run();
    this.#parent = undefined;
    this.#begin = undefined;
    const start = now();
    const result = await run();
    this.#begin = { sql, start, end: now() };
    return result;
  }

  /** COMMIT or ROLLBACK: beneath the transaction's parent; the connection then forgets it. */
  end<T>(sql: string, run: () => Promise<T>): Promise<T> {
    if (tracer() === undefined) return run();
    const parent = this.#parent;
    this.#parent = undefined;
    this.#begin = undefined;
    return traceStatement(sql, run, parent);
  }

  #writeBegin(parent: Span): void {
    const begin = this.#begin;
    this.#begin = undefined;
    if (begin === undefined) return;
    startStatement(parent, begin.sql, begin.start)?.end(begin.end);
  }
}

const idle = new ConnectionSpans();

/** The spans of a new connection: a shared one that records nothing while tracing is off. */
export function connectionSpans(): ConnectionSpans {
  return tracer() === undefined ? idle : new ConnectionSpans();
}

/** A CLIENT span for `sql` beneath `parent`; undefined while tracing is off. */
function startStatement(parent: Span, sql: string, startTime?: number): Span | undefined {
  const t = tracer();
  if (t === undefined) return undefined;
  const operation = operationOf(sql);
  return t.startSpan(
    operation,
    {
      kind: SpanKind.CLIENT,
      ...(startTime === undefined ? {} : { startTime }),
      attributes: { 'db.system': 'postgresql', 'db.system.name': 'postgresql', 'db.operation.name': operation },
    },
    trace.setSpan(ROOT_CONTEXT, parent),
  );
}
