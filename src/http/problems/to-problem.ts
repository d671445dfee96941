// Any error → the problem document (docs/api-guide.md#users, docs/api-guide.md#orders, docs/api-guide.md#versions, docs/api-guide.md#errors) in the form the route
// asks for. Pure: the error handler supplies the context and writes the reply. A domain error
// is looked up by its code in error-registry.ts; validation, framework and driver errors that
// never become domain errors are mapped here.
import type { ErrorObject } from 'ajv';
import { DomainError, RequestTimedOut } from '../../errors.js';
import { MAX_BODY_DEPTH } from '../body-guard.js';
import { isDataException, isDatabaseTimeout } from '../../db/pg-errors.js';
import { errorEntry, type RequestFacts } from './error-registry.js';
import { InvalidFields, toFieldErrors } from './field-errors.js';
import { INTERNAL_ERROR_DETAIL, PROBLEM_TYPES, STATUS_TITLES, type ProblemSlug } from './problem-types.js';
import { ERRORS_MAX } from '../schemas.js';

/**
 * How a route reports its errors: the v1 users form, the v1 orders form, or the
 * typed form used by v2, products and stock.
 */
export type ProblemForm = 'users-v1' | 'orders-v1' | 'typed';

export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  [extension: string]: unknown;
}

export interface Problem {
  status: number;
  body: ProblemDocument;
  headers?: Record<string, string>;
  /** True when the cause must be logged as an error (never shown to the client). */
  unexpected?: boolean;
}

export interface ProblemContext {
  form: ProblemForm;
  /** The request path without its query string (docs/api-guide.md#errors). */
  instance: string;
  errorTypeBase: string;
  requestId: string;
  /** The path or query values as the client sent them, before coercion (for `rejected`). */
  rawValues?: (part: 'params' | 'querystring') => Record<string, string | undefined>;
  /** What a detail may depend on (error-registry.ts); unknown: a write without an Idempotency-Key. */
  request?: RequestFacts;
}

const FRAMEWORK_DETAILS: Record<string, string> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'The request body is not valid JSON.',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'The request body is empty.',
  FST_ERR_CTP_BODY_TOO_LARGE: 'The request body is larger than 1 MiB.',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'The request body must be sent as application/json.',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'The Content-Length header does not match the body.',
  RESOURCE_API_BODY_TOO_DEEP: `The request body is nested deeper than ${MAX_BODY_DEPTH} levels.`,
};

export function toProblem(error: unknown, ctx: ProblemContext): Problem {
  if (error instanceof DomainError) return fromDomainError(error, ctx);
  if (error instanceof InvalidFields) return validationProblem(error.fieldErrors, ctx);
  if (isDataException(error)) return plain(400, 'The request carries a value the database cannot store.', ctx);
  if (isDatabaseTimeout(error)) return fromDomainError(new RequestTimedOut({ cause: error }), ctx);

  const e = error as {
    code?: string;
    statusCode?: number;
    validation?: ErrorObject[];
    validationContext?: string;
  } | null;
  if (e?.code === 'FST_ERR_VALIDATION' && Array.isArray(e.validation)) {
    // Path and query values were coerced before they failed: echo them as the client sent them.
    const raw =
      e.validationContext === 'params' || e.validationContext === 'querystring'
        ? ctx.rawValues?.(e.validationContext)
        : undefined;
    const fieldErrors = toFieldErrors(e.validation, raw);
    return fieldErrors === undefined
      ? plain(400, 'The request body must be a JSON object.', ctx)
      : validationProblem(fieldErrors, ctx);
  }
  const status = e?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return plain(
      status,
      FRAMEWORK_DETAILS[e?.code ?? ''] ??
        (STATUS_TITLES[status] ? `${STATUS_TITLES[status]}.` : 'The request was rejected.'),
      ctx,
    );
  }
  return internalError(ctx);
}

export function validationProblem(
  allFieldErrors: ReturnType<typeof toFieldErrors> & object,
  ctx: ProblemContext,
): Problem {
  const fieldErrors = allFieldErrors.slice(0, ERRORS_MAX);
  switch (ctx.form) {
    case 'users-v1':
      return problem(400, {
        type: 'about:blank',
        title: 'Validation Error',
        detail: 'Validation failed',
        instance: ctx.instance,
        errors: fieldErrors,
      });
    case 'orders-v1':
      return problem(400, {
        type: 'about:blank',
        title: 'Bad Request',
        detail: 'Invalid request content.',
        instance: ctx.instance,
        errors: fieldErrors.map((f) => `${f.field}: ${f.message}`),
      });
    case 'typed':
      return typed('validation-failed', 'Validation failed', ctx, {
        fieldErrors: fieldErrors.map(({ field, message }) => ({ field, message })),
      });
  }
}

function fromDomainError(error: DomainError, ctx: ProblemContext): Problem {
  const entry = errorEntry(error);
  const detail = entry.detail?.(error, ctx.request ?? { safe: false, keyed: false }) ?? error.message;
  const extensions = entry.extensions?.(error) ?? {};
  const v1 = ctx.form === 'typed' ? undefined : entry.forms?.[ctx.form]?.(error);
  const status = typeof entry.type === 'number' ? entry.type : PROBLEM_TYPES[entry.type].status;
  const result =
    v1 !== undefined
      ? problem(status, {
          type: 'about:blank',
          title: v1.title,
          detail,
          instance: ctx.instance,
          ...(v1.extensions ?? extensions),
        })
      : typeof entry.type === 'number'
        ? plain(entry.type, detail, ctx, extensions)
        : typed(entry.type, detail, ctx, extensions);
  const headers = entry.headers?.(error);
  return headers === undefined ? result : { ...result, headers };
}

/** 500 says only the fixed text; the requestId leads to the logged cause (docs/api-guide.md#errors). */
function internalError(ctx: ProblemContext): Problem {
  return { ...typed('internal-error', INTERNAL_ERROR_DETAIL, ctx, { requestId: ctx.requestId }), unexpected: true };
}

function typed(
  slug: ProblemSlug,
  detail: string,
  ctx: ProblemContext,
  extensions: Record<string, unknown> = {},
): Problem {
  const { status, title } = PROBLEM_TYPES[slug];
  return problem(status, {
    type: `${ctx.errorTypeBase}/${slug}`,
    title,
    detail,
    instance: ctx.instance,
    ...extensions,
  });
}

/** An about:blank problem: its title is the status's reason phrase (RFC 9457 §4.2.1). */
export function plain(
  status: number,
  detail: string,
  ctx: Pick<ProblemContext, 'instance'>,
  extensions: Record<string, unknown> = {},
): Problem {
  return problem(status, {
    type: 'about:blank',
    title: STATUS_TITLES[status] ?? 'Error',
    detail,
    instance: ctx.instance,
    ...extensions,
  });
}

interface ProblemFields {
  type: string;
  title: string;
  detail: string;
  instance: string;
  [extension: string]: unknown;
}

function problem(status: number, body: ProblemFields): Problem {
  const { type, title, detail, instance, ...extensions } = body as ProblemFields & {
    type: string;
    title: string;
    detail: string;
    instance: string;
  };
  // The standard members in their documented order, extensions after them.
  return { status, body: { type, title, status, detail, instance, ...extensions } };
}
