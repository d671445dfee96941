// Hot statements as server-side functions, behind a pooler in transaction mode (docs/operations.md,
// "A pooler in transaction mode").
//
// PgBouncer 1.18 keeps no prepared statements in transaction mode, so every statement sent
// through it is parsed and planned again on the server, and an order's statement, long and with
// every value written into it, costs the service more to build and encode than a prepared one's
// values (docs/benchmark-log.md, "Topologies"). A PL/pgSQL function caches the plans
// of its statements in each server connection that runs it, whichever client calls it: so each
// hot statement (a prepared query, db/prepared.ts) gets a function whose body is its text, and
// is then sent as `select * from <function>(<values>)`: a short text, planned in a few µs.
//
// The function is named after a hash of its text and types, so that instances of different
// versions (a rolling deploy) each call their own, and one made by another instance is the one
// this instance would make. It is made once per process, in the background, the first time the
// statement runs; until then, or if it cannot be made (a role without CREATE on the schema, a
// result the function cannot declare), the statement goes out as text, as before.
import { createHash } from 'node:crypto';
import type { Sql } from 'postgres';
import type { ConnectionTarget } from './connection-target.js';
import { singleUseClient, type Dial, type DriverOptions } from './driver-client.js';
import { literal } from './inline-parameters.js';

/** The prefix of every statement function's name. */
export const FUNCTION_PREFIX = 'resource_api_statement_';

const TAG = '$resource_api_statement$';

/** What a statement's description says: its parameters' and its columns' type OIDs. */
interface Description {
  types: readonly number[];
  columns: readonly { name: string; type: number }[];
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Makes (or finds, made by another instance) the function for `text` on the server `sql` reaches;
 * its name, or undefined when the statement cannot be one (no result columns, a column name
 * twice, a type a function cannot declare, no right to create). Throws only on a connection error.
 */
export async function makeStatementFunction(sql: Sql, text: string): Promise<string | undefined> {
  if (text.includes(TAG)) return undefined;
  const description = (await sql.unsafe(text).describe()) as unknown as Description;
  const { types, columns } = description;
  if (columns.length === 0) return undefined;
  const names = columns.map((c) => c.name);
  if (new Set(names).size !== names.length) return undefined;
  const oids = [...new Set([...types, ...columns.map((c) => c.type)])];
  const rows = await sql.unsafe<{ oid: number; name: string }[]>(
    `select oid::int as oid, format_type(oid, null) as name from pg_type where oid in (${oids.map((oid) => Math.trunc(oid)).join(',')})`,
  );
  const typeName = new Map(rows.map((r) => [r.oid, r.name]));
  const declared = (oid: number) => {
    const name = typeName.get(oid);
    return name === undefined || name === 'unknown' || name === 'record' ? undefined : name;
  };
  const parameterTypes = types.map(declared);
  const columnTypes = columns.map((c) => declared(c.type));
  if (parameterTypes.includes(undefined) || columnTypes.includes(undefined)) return undefined;
  // Made and called in the service's own schema (the first of its search_path), by a qualified
  // name: never a function of the same name that another schema on the path puts first.
  const [where] = await sql.unsafe<{ schema: string | null }[]>('select current_schema() as schema');
  const schema = where?.schema;
  if (schema == null) return undefined;
  const bare = `${FUNCTION_PREFIX}${createHash('sha256')
    .update(JSON.stringify([text, parameterTypes, names, columnTypes]))
    .digest('hex')
    .slice(0, 24)}`;
  const name = `${quoteIdent(schema)}.${bare}`;
  const body = `\n#variable_conflict use_column\nbegin\nreturn query ${text};\nend\n`;
  const create =
    `create function ${name}(${parameterTypes.join(', ')})` +
    ` returns table(${columns.map((c, i) => `${quoteIdent(c.name)} ${columnTypes[i]}`).join(', ')})` +
    ` language plpgsql as ${TAG}${body}${TAG}`;
  try {
    await sql.unsafe(create).simple();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    // One of that name exists (42723; 23505 when two instances created it at once): called only
    // if it is the one this instance would make, its body to the byte.
    if (code === '42723' || code === '23505') return (await sameBody(sql, schema, bare, body)) ? name : undefined;
    if (typeof code === 'string' && !code.startsWith('08') && !code.startsWith('57P')) return undefined;
    throw error;
  }
  return name;
}

/** Whether every function `schema.name` has exactly `body` in PL/pgSQL. */
async function sameBody(sql: Sql, schema: string, name: string, body: string): Promise<boolean> {
  const rows = await sql.unsafe<{ same: boolean }[]>(
    `select p.prosrc = $3 and l.lanname = 'plpgsql' as same from pg_proc p
       join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
      where n.nspname = $1 and p.proname = $2`,
    [schema, name, body],
  );
  return rows.length > 0 && rows.every((r) => r.same);
}

/** The text that runs statement function `name` with `parameters`, as one simple query. */
export function callText(name: string, parameters: readonly unknown[]): string {
  let args = '';
  for (let i = 0; i < parameters.length; i++) args += (i === 0 ? '' : ',') + literal(parameters[i]);
  return `select * from ${name}(${args})`;
}

/** A statement failed because the function it called was dropped under the running service. */
export function isMissingFunction(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '42883' && typeof message === 'string' && message.includes(FUNCTION_PREFIX);
}

/** How long making one statement function may take before the statement stays text for now. */
const MAKE_TIMEOUT_MS = 10_000;

/**
 * The functions of one pool's hot statements, by the statement's text: its name; null while it
 * is being made, or when it cannot be one. Made one after another, each on a connection of its
 * own to the host the pool uses: a statement's description (Parse, Describe) pipelined among another
 * client's simple queries leaves PgBouncer 1.18 with answers for a server connection it has
 * already unlinked, and the client waiting.
 */
export class StatementFunctions {
  readonly #functions = new Map<string, string | null>();
  #making: Promise<void> = Promise.resolve();

  constructor(
    private readonly target: ConnectionTarget,
    private readonly driverOptions: DriverOptions,
    private readonly dial: Dial | undefined,
    /** The host the pool uses now, by its index; undefined once the pool has ended. */
    private readonly host: () => number | undefined,
  ) {}

  /** A client of its own for making them (undefined once the pool has ended). */
  #connect(): Sql | undefined {
    const index = this.host();
    const endpoint = index === undefined ? undefined : (this.target.endpoints[index] ?? this.target.endpoints[0]);
    if (endpoint === undefined) return undefined;
    const own = { ...this.driverOptions, prepare: false, idle_timeout: 1, onclose: undefined };
    return singleUseClient(this.target.driverUrl, endpoint, own, { dial: this.dial, onDeath: () => {} });
  }

  /** The function to call for `text`: its name, or undefined while it goes out as text. */
  nameOf(text: string): string | null | undefined {
    return this.#functions.get(text);
  }

  /** `text` is a hot statement: its function is made in the background. */
  hot(text: string): void {
    if (this.#functions.has(text)) return;
    this.#functions.set(text, null);
    this.#making = this.#making.then(async () => {
      const sql = this.#connect();
      if (sql === undefined) return void this.#functions.delete(text);
      let timer: NodeJS.Timeout | undefined;
      try {
        const name = await Promise.race([
          makeStatementFunction(sql, text),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('statement function: no answer')), MAKE_TIMEOUT_MS).unref();
          }),
        ]);
        if (name !== undefined && this.#functions.has(text)) this.#functions.set(text, name);
      } catch {
        // The server could not be reached: tried again the next time the statement runs.
        this.#functions.delete(text);
      } finally {
        clearTimeout(timer);
        await sql.end({ timeout: 0 }).catch(() => {});
      }
    });
  }

  /** `text`'s function was dropped: the statement goes as text, and a new one is made. */
  forget(text: string): void {
    this.#functions.delete(text);
  }

  /** How many hot statements go out as calls of their function, and how many as text. */
  counts(): { calls: number; texts: number } {
    let calls = 0;
    for (const name of this.#functions.values()) if (name !== null) calls++;
    return { calls, texts: this.#functions.size - calls };
  }
}
