// A typed client for resource-api: the types are generated from the service's OpenAPI document
// (schema.ts, by openapi-typescript), the calls go through openapi-fetch, and this file adds what
// a generated client leaves to every caller: problem documents as typed errors, paging through
// Link and X-Total-Count, ETags for If-Match, and retries that are safe with an Idempotency-Key.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths } from './schema.js';
export type Schemas = components['schemas'];
export type Problem = Schemas['Problem'];

/** One field that failed validation, from whichever problem form the route answers with. */
export interface FieldError {
  field: string;
  message: string;
}

/** A non-2xx answer: the RFC 9457 problem document, with its status and the raw response. */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  /** The raw answer (headers, status text). Not enumerable: an uncaught error prints as its problem. */
  declare readonly response: Response;
  constructor(
    readonly status: number,
    readonly problem: Problem,
    response: Response,
  ) {
    super(`${String(status)} ${problem.title}${problem.detail ? `: ${problem.detail}` : ''}`);
    Object.defineProperty(this, 'response', { value: response, enumerable: false });
  }

  get type(): string {
    return this.problem.type;
  }

  /** The fields that failed validation, in one shape for the three problem forms. */
  get fieldErrors(): FieldError[] {
    const typed = this.problem.fieldErrors ?? [];
    const listed = (this.problem.errors ?? []).map((e): FieldError => {
      if (typeof e !== 'string') return { field: e.field, message: e.message };
      const colon = e.indexOf(': ');
      return colon === -1 ? { field: '', message: e } : { field: e.slice(0, colon), message: e.slice(colon + 2) };
    });
    return [...typed, ...listed];
  }

  /** Seconds the service asked to wait (429, 503, a 409 for an Idempotency-Key in use). */
  get retryAfter(): number | undefined {
    const value = this.response.headers.get('retry-after');
    return value === null ? undefined : Number(value);
  }
}

/** What a successful call gives: the body, and the headers a client acts on. */
export interface Answer<T> {
  data: T;
  /** The resource's version ("3"), to send back as If-Match or If-None-Match. */
  etag: string | undefined;
  /** true when the answer is the stored one of an earlier request with the same Idempotency-Key. */
  replayed: boolean;
  response: Response;
}

interface Outcome<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

const PROBLEM_FALLBACK = (response: Response): Problem => ({
  type: 'about:blank',
  title: response.statusText || 'Error',
  status: response.status,
  detail: '',
  instance: new URL(response.url || 'http://invalid/').pathname,
});

function isProblem(value: unknown): value is Problem {
  return typeof value === 'object' && value !== null && 'status' in value && 'title' in value;
}

/** The body of a 2xx (or 304) answer, or a ProblemError for anything else. */
export async function unwrap<T>(call: Promise<Outcome<T>> | Outcome<T>): Promise<Answer<T>> {
  const { data, error, response } = await call;
  if (!response.ok && response.status !== 304)
    throw new ProblemError(response.status, isProblem(error) ? error : PROBLEM_FALLBACK(response), response);
  return {
    data: data as T,
    etag: response.headers.get('etag') ?? undefined,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    response,
  };
}

export interface RetryOptions {
  /** The Idempotency-Key to use; a new UUID when left out. Keep it to retry the same request later. */
  key?: string;
  /** Sends at most this many times (5). */
  attempts?: number;
  /** Waits before the next attempt after a network failure (200 ms, doubling). */
  backoffMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends a POST or PATCH with an Idempotency-Key and sends it again, with the same key, when the
 * network fails or the service answers that the first attempt is still running (409 with
 * Retry-After): the service then places the order, or makes the change, exactly once, and a
 * retry gets the first answer back (`replayed: true`). Any other answer is final.
 */
export async function withRetries<T>(
  send: (idempotencyKey: string) => Promise<Outcome<T>>,
  options: RetryOptions = {},
): Promise<Answer<T>> {
  const key = options.key ?? crypto.randomUUID();
  const attempts = options.attempts ?? 5;
  let backoff = options.backoffMs ?? 200;
  for (let attempt = 1; ; attempt++) {
    try {
      return await unwrap(send(`"${key}"`));
    } catch (error) {
      if (attempt >= attempts) throw error;
      if (error instanceof ProblemError) {
        if (!(error.status === 409 && error.retryAfter !== undefined)) throw error;
        await sleep(error.retryAfter * 1000);
      } else {
        await sleep(backoff);
        backoff *= 2;
      }
    }
  }
}

/** The RFC 8288 Link header as { rel: url }. */
export function parseLinks(header: string | null): Record<string, string> {
  const links: Record<string, string> = {};
  for (const part of (header ?? '').split(/,(?=\s*<)/)) {
    const [, url, rels] = /<([^>]*)>\s*;\s*rel="?([^";]+)"?/.exec(part) ?? [];
    if (url !== undefined && rels !== undefined) for (const rel of rels.split(/\s+/)) links[rel] = url;
  }
  return links;
}

interface PageBody<T> {
  content: T[];
  totalElements: number;
}

/** One page of a list, with the count of all items and the way to the next page. */
export interface Page<T> {
  items: T[];
  /** X-Total-Count: the number of items in the whole list. */
  total: number;
  /** The next page's URL from Link rel="next", if there is one. */
  next: string | undefined;
}

export interface ResourceApiOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the service runs, e.g. https://api.example.com (no trailing path). */
  baseUrl: string;
  /** A Bearer token, or a function returning a current one before every request. */
  token?: string | (() => string | Promise<string>);
}

export interface ResourceApi {
  /** The typed openapi-fetch client: client.GET('/api/v1/users/{id}', { params: { path: { id } } }). */
  client: Client<paths>;
  /** Every item of a list, page after page, following Link rel="next" from the first page. */
  all<T>(first: Promise<Outcome<PageBody<T>>>): AsyncGenerator<T, void, undefined>;
  /** One page of a list, with X-Total-Count and the next page's URL. */
  page<T>(call: Promise<Outcome<PageBody<T>>> | string): Promise<Page<T>>;
}

export function createResourceApi(options: ResourceApiOptions): ResourceApi {
  const { token, ...clientOptions } = options;
  const bearer = async () => (typeof token === 'function' ? await token() : token);
  const client = createClient<paths>(clientOptions);
  client.use({
    async onRequest({ request }) {
      const value = await bearer();
      if (value !== undefined) request.headers.set('authorization', `Bearer ${value}`);
      return request;
    },
  });
  const fetchImpl = clientOptions.fetch ?? globalThis.fetch;

  /** A page by its absolute URL (a Link target), through the same fetch and token. */
  async function pageAt<T>(url: string): Promise<Outcome<PageBody<T>>> {
    const value = await bearer();
    const response = await fetchImpl(
      new Request(url, { headers: value === undefined ? {} : { authorization: `Bearer ${value}` } }),
    );
    const body: unknown = await response.json();
    return response.ok ? { data: body as PageBody<T>, response } : { error: body, response };
  }

  async function page<T>(call: Promise<Outcome<PageBody<T>>> | string): Promise<Page<T>> {
    const { data, response } = await unwrap(typeof call === 'string' ? pageAt<T>(call) : call);
    const total = response.headers.get('x-total-count');
    return {
      items: data.content,
      total: total === null ? data.totalElements : Number(total),
      next: parseLinks(response.headers.get('link')).next,
    };
  }

  return {
    client,
    page,
    async *all<T>(first: Promise<Outcome<PageBody<T>>>) {
      let current = await page(first);
      for (;;) {
        yield* current.items;
        if (current.next === undefined) return;
        current = await page<T>(current.next);
      }
    },
  };
}
