// Named prepared statements on PGlite, one protocol exchange per execution.
//
// PGlite's query() sends every statement as six separate exchanges with the WebAssembly
// backend (Parse, Describe, Bind, Describe, Execute, Sync), and parses and plans it again each
// time. Here a statement's text is parsed once under a name (with its parameter and result
// types), and each execution is one Bind + Execute + Sync: PostgreSQL keeps the plan, as it does
// for postgres.js's prepared statements on the server engine. The results are the same: the
// same type parsers and serializers (PGlite's own, by type OID), the same row objects, the
// same affected-row counts (see docs/benchmark-log.md for what it bought).
import { protocol, type PGlite } from '@electric-sql/pglite';

const { serialize } = protocol;
const SYNC = serialize.sync();
const EXECUTE = serialize.execute({});

/** A statement parsed under a name: how to bind its values and read its rows. */
interface Named {
  name: string;
  parameterTypes: number[];
  /** Each column's name, type and PGlite's parser for that type (none: the text as it is). */
  columns: { name: string; dataTypeID: number; parse: ((text: string, typeId: number) => unknown) | undefined }[];
}

/** The shape of query()'s answer that the dialect reads. */
export interface StatementResult {
  rows: unknown[];
  affectedRows?: number | undefined;
}

/** Statements worth keeping: the ones a request runs again (DDL and transaction control are not). */
const REUSABLE = /^\s*\(?\s*(select|insert|update|delete|with)\b/i;

/** PostgreSQL's answer when a table changed under a kept statement. */
const STALE = { code: '0A000', message: 'cached plan must not change result type' };

function isStale(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return e?.code === STALE.code && e.message === STALE.message;
}

interface BackendMessage {
  name: string;
}

/** Numbers each PGliteStatements, so that two on one PGlite never name a statement alike. */
let instances = 0;

/**
 * The statements of one PGlite instance, kept by text (at most `max`, least recently used
 * closed first). The caller serializes access (the dialect's mutex), as PGlite needs.
 */
export class PGliteStatements {
  readonly #kept = new Map<string, Named>();
  readonly #toClose: string[] = [];
  readonly #prefix = `resource_api_${++instances}_`;
  #count = 0;

  constructor(
    private readonly pglite: PGlite,
    private readonly max = 500,
  ) {}

  async query(sql: string, parameters: readonly unknown[]): Promise<StatementResult> {
    if (!REUSABLE.test(sql)) return this.pglite.query(sql, parameters as unknown[]);
    let statement = this.#kept.get(sql);
    if (statement === undefined) statement = await this.#prepare(sql);
    else {
      // Most recently used last, so that the first entry is the one to close.
      this.#kept.delete(sql);
      this.#kept.set(sql, statement);
    }
    try {
      return await this.#execute(statement, parameters);
    } catch (error) {
      // A table changed its columns since the statement was parsed: parse it again, and run it
      // again unless the error has aborted a transaction (then the caller's rollback comes first).
      if (!isStale(error)) throw error;
      this.#forget(sql, statement);
      if (this.pglite.isInTransaction()) throw error;
      return this.#execute(await this.#prepare(sql), parameters);
    }
  }

  async #prepare(sql: string): Promise<Named> {
    const name = `${this.#prefix}${++this.#count}`;
    const { messages } = await this.pglite.execProtocol(
      Buffer.concat([
        ...this.#closing(),
        serialize.parse({ name, text: sql }),
        serialize.describe({ type: 'S', name }),
        SYNC,
      ]),
    );
    let parameterTypes: number[] = [];
    let fields: { name: string; dataTypeID: number }[] = [];
    for (const message of messages as (BackendMessage & Record<string, unknown>)[]) {
      if (message.name === 'parameterDescription') parameterTypes = message.dataTypeIDs as number[];
      else if (message.name === 'rowDescription') fields = message.fields as typeof fields;
    }
    const { parsers } = this.pglite;
    const statement: Named = {
      name,
      parameterTypes,
      columns: fields.map(({ name, dataTypeID }) => ({ name, dataTypeID, parse: parsers[dataTypeID] })),
    };
    this.#kept.set(sql, statement);
    if (this.#kept.size > this.max) {
      const [oldest] = this.#kept;
      if (oldest !== undefined) this.#forget(...oldest);
    }
    return statement;
  }

  /** Drops a statement; its Close goes out with the next exchange. */
  #forget(sql: string, statement: Named): void {
    if (this.#kept.get(sql) === statement) this.#kept.delete(sql);
    this.#toClose.push(statement.name);
  }

  #closing(): Uint8Array[] {
    return this.#toClose.splice(0).map((name) => serialize.close({ type: 'S', name }));
  }

  async #execute(statement: Named, parameters: readonly unknown[]): Promise<StatementResult> {
    const { serializers } = this.pglite;
    const values = parameters.map((value, i) => {
      if (value === null || value === undefined) return null;
      const write = serializers[statement.parameterTypes[i] ?? 0];
      // As query() binds a value of a type PGlite has no serializer for: its toString().
      return write ? write(value) : (value as { toString(): string }).toString();
    });
    const { messages } = await this.pglite.execProtocol(
      Buffer.concat([...this.#closing(), serialize.bind({ statement: statement.name, values }), EXECUTE, SYNC]),
    );
    const { columns } = statement;
    const rows: Record<string, unknown>[] = [];
    let affectedRows = 0;
    for (const message of messages as (BackendMessage & Record<string, unknown>)[]) {
      if (message.name === 'dataRow') {
        const texts = message.fields as (string | null)[];
        const row: Record<string, unknown> = {};
        for (const [i, { name, dataTypeID, parse }] of columns.entries()) {
          const text = texts[i] ?? null;
          row[name] = text === null ? null : parse ? parse(text, dataTypeID) : text;
        }
        rows.push(row);
      } else if (message.name === 'commandComplete') {
        // As PGlite counts them: the tag's last number, for the commands that change rows.
        const parts = (message.text as string).split(' ');
        if (['INSERT', 'UPDATE', 'DELETE', 'COPY', 'MERGE'].includes(parts[0] ?? ''))
          affectedRows += parseInt(parts[parts.length - 1] ?? '', 10);
      }
    }
    return { rows, affectedRows };
  }
}
