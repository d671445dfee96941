// The registry of typed problems (docs/api-guide.md#versions): slug → status, title, and the text of
// the page served at /api/public/problems/{slug}. The only place these words are written.

export interface ProblemType {
  readonly status: number;
  readonly title: string;
  readonly description: string;
}

export const PROBLEM_TYPES = {
  'entity-not-found': {
    status: 404,
    title: 'Entity Not Found',
    description: 'The resource named in the request path does not exist, or is not visible to the caller.',
  },
  'validation-failed': {
    status: 400,
    title: 'Validation Failed',
    description: 'The request body or parameters break one or more rules; fieldErrors lists each field and rule.',
  },
  'business-rule-violation': {
    status: 422,
    title: 'Business Rule Violation',
    description: 'The request is well-formed but breaks a business rule, such as ordering more than is in stock.',
  },
  conflict: {
    status: 409,
    title: 'Conflict',
    description:
      'The request conflicts with the current state, such as a duplicate unique value; conflictingField names it.',
  },
  overloaded: {
    status: 503,
    title: 'Service Unavailable',
    description:
      'The instance has more requests than it can answer in time and refused this one before starting it. Retry after the number of seconds in Retry-After.',
  },
  'internal-error': {
    status: 500,
    title: 'Internal Server Error',
    description: 'The service failed unexpectedly. The requestId member matches the server log entry.',
  },
} as const satisfies Record<string, ProblemType>;

export type ProblemSlug = keyof typeof PROBLEM_TYPES;

/** Reason phrases for about:blank problems, whose title is the status's phrase (RFC 9457 §4.2.1). */
export const STATUS_TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  408: 'Request Timeout',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export const INTERNAL_ERROR_DETAIL = 'An unexpected error occurred';
