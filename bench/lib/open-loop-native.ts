// openLoop() (open-loop.ts) run by a native generator, open-loop.c (bench --overload): the same
// options, the same schedule and counts, the same OpenLoopResult. In this process the generator
// took the whole load core at 40,000 requests a second (p99 ~380 ms against a server that kept
// up) and could not offer 60,000 (3× the capacity of a cheap GET, what the overload phases
// need); the C program offers 60,000 (p99 ~3 ms) on ~0.8 of the core, the rest left to PostgreSQL.
//
// The C source is compiled once with the machine's C compiler into node_modules/.cache/ (again
// when the source changes) and run as a child process pinned to the load core, which inherits
// this process's priority (instrumentFirst() of the overload mode). Without a C compiler, or off
// Linux (it uses epoll), openLoop() runs instead, and that is said once on stderr.
//
// What differs from openLoop(): plan(i) is read for the first `distinct` requests only, and the
// i-th request of the schedule is the (i mod distinct)-th of them, so a plan must repeat that
// often (it is checked on the next `distinct`, and said on stderr when it does not); requests
// past their time-out are abandoned at the next turn of the generator (≤ ~1 ms late) rather than
// at openLoop()'s 20-ms sweep; a status line that cannot be read counts as status 0.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { headerLines, openLoop, requestText, type OpenLoopResult } from './open-loop.js';
import { LOAD_CORE, cores, pin } from './proc.js';

export type OpenLoopOptions = Parameters<typeof openLoop>[0];

export interface NativeOpenLoopOptions extends OpenLoopOptions {
  /** How many distinct requests plan() makes (its period): plan(i) is sent as plan(i mod distinct). Default 1024. */
  distinct?: number;
}

export interface NativeOpenLoopResult extends OpenLoopResult {
  /** The generator's own figures (undefined when openLoop() ran instead). */
  generator?: {
    /** Requests written (the rest timed out waiting for a connection). */
    sent: number;
    /** Connections opened: the first ones and those opened in place of the closed. */
    connectionsOpened: number;
    /** Its CPU time, s, and the schedule's wall time to the last answer or time-out, s. */
    cpuSeconds: number;
    runSeconds: number;
    /** How long the pool took to open before the schedule began, s. */
    openSeconds: number;
    /** ms from a request's due time to its write: the wait for a connection and for the generator. */
    sendLagP99: number;
    sendLagMax: number;
  };
}

const SOURCE = join(import.meta.dirname, 'open-loop.c');
/** Outside the tracked tree, and gone with node_modules. */
export const CACHE = join(import.meta.dirname, '..', '..', 'node_modules', '.cache', 'resource-api-bench');
const FLAGS = ['-O2', '-std=gnu11', '-Wall', '-Wextra'];

/**
 * The generator's binary, compiled from open-loop.c into `cache` by the first of `compilers` that
 * exists (unless one built from the same source is there), or undefined if none does. A compiler
 * that fails throws: the source is wrong, and a fallback would hide it.
 */
export function nativeBinary(
  compilers: string[] = [...(process.env.CC ? [process.env.CC] : []), 'cc', 'gcc', 'clang'],
  cache: string = CACHE,
): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const source = readFileSync(SOURCE);
  const hash = createHash('sha256').update(source).update(FLAGS.join(' ')).digest('hex').slice(0, 16);
  const binary = join(cache, `open-loop-${hash}`);
  if (existsSync(binary)) return binary;
  mkdirSync(cache, { recursive: true });
  // Built beside, then renamed into place: test files in parallel may compile it at once.
  const partial = `${binary}.${process.pid}`;
  for (const compiler of compilers) {
    try {
      execFileSync(compiler, [...FLAGS, '-o', partial, SOURCE], { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      const e = error as NodeJS.ErrnoException & { stderr?: Buffer };
      if (e.code === 'ENOENT') continue;
      rmSync(partial, { force: true });
      throw new Error(`${compiler} could not compile ${SOURCE}: ${e.stderr?.toString() ?? e.message}`, {
        cause: error,
      });
    }
    renameSync(partial, binary);
    // The builds of earlier sources are of no more use.
    for (const name of readdirSync(cache))
      if (/^open-loop-[0-9a-f]{16}$/.test(name) && join(cache, name) !== binary)
        rmSync(join(cache, name), { force: true });
    return binary;
  }
  return undefined;
}

let binary: string | null | undefined;
let pinned: boolean | undefined;
const said = new Set<string>();

/** Says `message` on stderr, once a process. */
function sayOnce(message: string): void {
  if (said.has(message)) return;
  said.add(message);
  process.stderr.write(`${message}\n`);
}

/** Which generator openLoopNative() runs here (and compiles it, the first time). */
export function generatorName(): string {
  if (binary === undefined) binary = nativeBinary() ?? null;
  return binary === null ? 'openLoop() in Node (no C compiler, or not Linux)' : 'native (bench/lib/open-loop.c)';
}

/** The command that runs `command` on the load core: with taskset where there is one. */
function onLoadCore(command: [string, ...string[]]): [string, ...string[]] {
  if (pinned === undefined && cores >= 2) {
    try {
      execFileSync('taskset', ['-c', LOAD_CORE, 'true'], { stdio: 'ignore' });
      pinned = true;
    } catch {
      pinned = false;
      sayOnce('open-loop: no taskset here; the native generator runs where the scheduler puts it');
    }
  }
  return pinned === true ? pin(LOAD_CORE, command) : command;
}

/** openLoop(), by the native generator where it can be built. */
export async function openLoopNative(options: NativeOpenLoopOptions): Promise<NativeOpenLoopResult> {
  generatorName();
  if (binary === null || binary === undefined) {
    sayOnce('open-loop: no C compiler found (or not Linux): the overload bench offers load from Node, openLoop()');
    return openLoop(options);
  }
  const { port, rate, seconds, plan } = options;
  const timeoutMs = options.timeoutMs ?? 2000;
  const goodMs = options.goodMs ?? 500;
  const connections = options.connections ?? 1000;
  const total = Math.round(rate * seconds);
  const distinct = Math.max(1, Math.min(total, options.distinct ?? 1024));
  const headerText = headerLines(options.headers);
  const texts = Array.from({ length: distinct }, (_, i) => requestText(plan(i), headerText));
  for (let i = distinct; i < Math.min(total, 2 * distinct); i++)
    if (requestText(plan(i), headerText) !== texts[i - distinct]) {
      sayOnce(
        `open-loop: the plan does not repeat every ${distinct} requests (request ${i} differs); the native generator sends plan(i mod ${distinct})`,
      );
      break;
    }
  const input = Buffer.concat(
    texts.flatMap((text) => {
      const bytes = Buffer.from(text);
      return [Buffer.from(`${bytes.length}\n`), bytes];
    }),
  );
  const [command, ...args] = onLoadCore([
    binary,
    String(port),
    String(rate),
    String(seconds),
    String(connections),
    String(timeoutMs),
    String(goodMs),
  ]);
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
  // A generator that exits early (bad arguments) says why on stderr; its exit code is what counts.
  child.stdin.on('error', () => {});
  child.stdin.end(input);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`the native generator exited with ${code}: ${Buffer.concat(err).toString()}`);
  const raw = JSON.parse(Buffer.concat(out).toString()) as {
    offered: number;
    good: number;
    statuses: Record<string, number>;
    timeouts: number;
    errors: number;
    perSecond: [number, number][];
    admitted: number[];
    admittedDue: number[];
    refused: number[];
    generator: NonNullable<NativeOpenLoopResult['generator']>;
  };
  return {
    offered: raw.offered,
    seconds,
    good: raw.good,
    statuses: new Map(Object.entries(raw.statuses).map(([status, n]) => [Number(status), n])),
    timeouts: raw.timeouts,
    errors: raw.errors,
    admitted: raw.admitted,
    admittedDue: raw.admittedDue,
    refused: raw.refused,
    perSecond: raw.perSecond.map(([ok, refused]) => ({ ok, refused })),
    generator: raw.generator,
  };
}
