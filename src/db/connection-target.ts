// Where a pool's connections go, read from a postgres:// URL the way libpq reads it: one host or
// several (`postgres://h1:5432,h2:5432/db`), and which of them a session may use
// (`target_session_attrs`). The pool (postgres-pool.ts) dials the hosts itself and checks each
// new session's state with a statement of its own, so postgres.js is given one host and no
// session attributes: it never chooses a host, nor sends a statement of its own.

export type SessionAttrs = 'any' | 'read-write' | 'read-only' | 'primary' | 'standby' | 'prefer-standby';

export interface Endpoint {
  host: string;
  port: number;
}

export interface ConnectionTarget {
  /** The hosts, in the URL's order. */
  readonly endpoints: readonly Endpoint[];
  /** Which sessions the service accepts: with several hosts and none named, the primary. */
  readonly attrs: SessionAttrs;
  /** The URL for postgres.js: the first host only, no target_session_attrs (credentials, database, options kept). */
  readonly driverUrl: string;
}

const ATTRS = new Set<string>(['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby']);

/**
 * The hosts and session attributes of `url`. With several hosts and no `target_session_attrs`,
 * the service asks for the primary: it writes, and only the primary takes writes.
 */
export function connectionTarget(url: string): ConnectionTarget {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/is.exec(url);
  if (match === null) throw new TypeError('not a postgres:// URL');
  const [, scheme = '', userinfo = '', authority = '', rest = ''] = match;
  const defaultPort = 5432;
  const endpoints = authority
    .split(',')
    .filter((part) => part.length > 0)
    .map((part): Endpoint => {
      const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(part);
      if (v6 !== null) return { host: v6[1] ?? '', port: v6[2] === undefined ? defaultPort : Number(v6[2]) };
      const colon = part.lastIndexOf(':');
      if (colon === -1) return { host: decodeURIComponent(part), port: defaultPort };
      return { host: decodeURIComponent(part.slice(0, colon)), port: Number(part.slice(colon + 1)) || defaultPort };
    });
  if (endpoints.length === 0) endpoints.push({ host: 'localhost', port: defaultPort });

  const queryStart = rest.indexOf('?');
  const path = queryStart === -1 ? rest : rest.slice(0, queryStart);
  const params = new URLSearchParams(queryStart === -1 ? '' : rest.slice(queryStart + 1));
  const named = params.get('target_session_attrs');
  params.delete('target_session_attrs');
  if (named !== null && !ATTRS.has(named)) throw new TypeError(`target_session_attrs=${named} is not supported`);
  const attrs: SessionAttrs = (named as SessionAttrs | null) ?? (endpoints.length > 1 ? 'primary' : 'any');

  const [first] = endpoints as [Endpoint];
  const host = first.host.includes(':') ? `[${first.host}]` : encodeURIComponent(first.host);
  const query = params.toString();
  return {
    endpoints,
    attrs,
    driverUrl: `${scheme}${userinfo}${host}:${first.port}${path}${query === '' ? '' : `?${query}`}`,
  };
}

/** What a new session says of itself: the statement the pool opens every connection with. */
export const SESSION_STATE =
  "select pg_is_in_recovery() as standby, current_setting('transaction_read_only') as read_only";

/** Whether a session in `state` (SESSION_STATE's row) is one `attrs` accepts. */
export function accepts(attrs: SessionAttrs, state: { standby: boolean; read_only: string }): boolean {
  switch (attrs) {
    case 'read-write':
      return state.read_only === 'off';
    case 'read-only':
      return state.read_only === 'on';
    case 'primary':
      return !state.standby;
    case 'standby':
      return state.standby;
    default:
      // 'any'; and 'prefer-standby', taken as any: the first host that answers serves.
      return true;
  }
}
