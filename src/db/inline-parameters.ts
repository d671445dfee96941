// Statements for a pooler in transaction mode, sent in one round trip (docs/operations.md,
// "A pooler in transaction mode").
//
// PgBouncer 1.18 keeps no prepared statements in transaction mode, and postgres.js sends an
// unnamed statement with parameters in two round trips (it describes the statement first, to
// learn the parameter types) and pipelines none of them (docs/benchmark-log.md, "Topologies").
// Drivers meet this the same way (pgx's simple protocol mode, made for
// PgBouncer): the values are written into the statement as quoted literals and the statement
// goes out as one simple query, which pipelines. A quoted literal is of type unknown, as an
// untyped parameter is, so the server resolves it the same way.
//
// Safety rests on the quoting: every value becomes a single-quoted literal with its quotes
// doubled, and standard_conforming_strings is on (checked when the pool connects), so a
// backslash is a backslash. A NUL cannot be sent in a simple query (it ends the message's
// string): such a value fails as PostgreSQL fails it (22021), before anything is sent.

/** One value as a quoted SQL literal (or NULL). */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  return quote(text(value));
}

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return value ? 't' : 'f';
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Uint8Array) return `\\x${Buffer.from(value).toString('hex')}`;
  if (Array.isArray(value)) return arrayText(value);
  return JSON.stringify(value);
}

/** PostgreSQL's array input form: {"a","b",NULL}, nested for nested arrays. */
export function arrayText(values: readonly unknown[]): string {
  const parts = values.map((v) => {
    if (v === null || v === undefined) return 'NULL';
    if (Array.isArray(v)) return arrayText(v);
    return `"${text(v).replace(/[\\"]/g, '\\$&')}"`;
  });
  return `{${parts.join(',')}}`;
}

function quote(value: string): string {
  if (value.includes('\0'))
    throw Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021' });
  return `'${value.replaceAll("'", "''")}'`;
}

/**
 * `text` with each `$n` placeholder replaced by its value as a literal. Placeholders inside
 * string literals, quoted identifiers, dollar-quoted bodies and comments are left alone.
 */
export function inlineParameters(sql: string, parameters: readonly unknown[]): string {
  if (parameters.length === 0) return sql;
  let out = '';
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql.charAt(i);
    const next = sql.charAt(i + 1);
    if (c === "'" || c === '"') {
      const end = closing(sql, i + 1, c);
      out += sql.slice(i, end);
      i = end;
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end === -1 ? n : end;
      out += sql.slice(i, stop);
      i = stop;
    } else if (c === '/' && next === '*') {
      const end = sql.indexOf('*/', i + 2);
      const stop = end === -1 ? n : end + 2;
      out += sql.slice(i, stop);
      i = stop;
    } else if (c === '$') {
      const placeholder = /^\$(\d+)/.exec(sql.slice(i, i + 8));
      const tag = placeholder === null ? /^\$[A-Za-z_]?[A-Za-z0-9_]*\$/.exec(sql.slice(i)) : null;
      if (placeholder !== null && !/[A-Za-z0-9_]/.test(sql[i - 1] ?? '')) {
        const index = Number(placeholder[1]) - 1;
        if (index < 0 || index >= parameters.length) throw new RangeError(`no parameter for $${placeholder[1]}`);
        out += literal(parameters[index]);
        i += placeholder[0].length;
      } else if (tag !== null) {
        const end = sql.indexOf(tag[0], i + tag[0].length);
        const stop = end === -1 ? n : end + tag[0].length;
        out += sql.slice(i, stop);
        i = stop;
      } else {
        out += c;
        i++;
      }
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** The index just past the quote that closes a literal opened before `from` ('' and "" stay inside). */
function closing(sql: string, from: number, quoteChar: string): number {
  let i = from;
  for (;;) {
    const at = sql.indexOf(quoteChar, i);
    if (at === -1) return sql.length;
    if (sql[at + 1] === quoteChar) {
      i = at + 2;
      continue;
    }
    return at + 1;
  }
}

/**
 * `parameters` as the pool sends them: an array as one text value in PostgreSQL's array input
 * form, which the statement casts (the driver fetches no array types: docs/architecture.md,
 * "How a connection lives and dies"). The same array, untouched, when it holds none.
 */
export function driverParameters(parameters: readonly unknown[]): readonly unknown[] {
  for (let i = 0; i < parameters.length; i++) {
    if (Array.isArray(parameters[i])) return parameters.map((p) => (Array.isArray(p) ? arrayText(p) : p));
  }
  return parameters;
}

/**
 * A one- or more-dimensional array in PostgreSQL's text output form (`{a,"b c",NULL}`), each
 * element through `element` (the driver fetches no array types, so the pool parses the array
 * columns the service reads: create-database.ts).
 */
export function parseArray<T>(text: string, element: (value: string) => T): (T | null | unknown[])[] {
  let i = 0;
  const parse = (): (T | null | unknown[])[] => {
    const out: (T | null | unknown[])[] = [];
    i++; // {
    if (text[i] === '}') {
      i++;
      return out;
    }
    for (;;) {
      if (text[i] === '{') out.push(parse());
      else if (text[i] === '"') {
        let value = '';
        i++;
        while (text[i] !== '"') {
          if (text[i] === '\\') i++;
          value += text.charAt(i++);
        }
        i++;
        out.push(element(value));
      } else {
        const start = i;
        while (text[i] !== ',' && text[i] !== '}') i++;
        const value = text.slice(start, i);
        out.push(value === 'NULL' ? null : element(value));
      }
      if (text[i++] === '}') return out;
    }
  };
  // A leading dimension decoration ([0:1]={…}) is skipped.
  if (text[0] === '[') i = text.indexOf('=') + 1;
  return parse();
}
