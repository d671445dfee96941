// The bench's processes on their cores, and what /proc says of their CPU and memory (and of
// PostgreSQL's backends). Nothing runs at import: readClockTick() reads the clock's tick once.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';

export const cores = availableParallelism();
export const SERVER_CORE = '0';
export const LOAD_CORE = String(cores - 1);
export const pin = (core: string, command: [string, ...string[]]): [string, ...string[]] =>
  cores >= 2 ? ['taskset', '-c', core, ...command] : command;

// ---- CPU and memory from /proc ----------------------------------------------------------------

/** µs per clock tick of /proc's CPU times (set by setUp). */
export let TICK_US = 0;

/** Reads the clock's tick (getconf CLK_TCK) into TICK_US: once, before any measurement. */
export function readClockTick(): void {
  TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());
}

export function cpuTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime
  } catch {
    return 0;
  }
}

/** A core's busy and total ticks since boot (/proc/stat: all but idle and iowait are busy). */
export function coreTicks(core: string): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `));
  const t = (line ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = t.reduce((a, b) => a + b, 0);
  return { busy: total - (t[3] ?? 0) - (t[4] ?? 0), total };
}

/**
 * CPU ticks of every PostgreSQL process, by pid (backends come and go), and what it is: `backend`
 * for a client's connection, else its title (`walwriter`, `autovacuum worker`, `checkpointer`…).
 */
export function postgresTicks(): Map<number, { ticks: number; kind: string }> {
  const out = new Map<number, { ticks: number; kind: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const kind = /\(\d+\)|\[local\]/.test(title) ? 'backend' : (title.split(': ').at(-1) ?? title);
      out.set(Number(entry), { ticks: cpuTicks(Number(entry)), kind });
    } catch {
      // gone
    }
  }
  return out;
}

/** PostgreSQL's CPU ticks between two readings, by kind of process. */
export function postgresDelta(
  before: Map<number, { ticks: number }>,
  after: Map<number, { ticks: number; kind: string }>,
): Map<string, number> {
  const byKind = new Map<string, number>();
  for (const [pid, { ticks, kind }] of after) {
    const delta = ticks - (before.get(pid)?.ticks ?? 0);
    if (delta > 0) byKind.set(kind, (byKind.get(kind) ?? 0) + delta);
  }
  return byKind;
}

/**
 * Where PostgreSQL runs (BENCH_POSTGRES_CORE): `load` (default) pins every PostgreSQL process to
 * the load core, beside wrk, so the server core runs the server alone, as it would beside a
 * database on another machine; `server` pins them beside the servers; `none` leaves them to the
 * scheduler. Unpinned, where the scheduler happened to put the backends that serve a process
 * (beside it or beside wrk) decided its rate by up to 1.5×, so two processes of one build were
 * not comparable (docs/benchmark-log.md, "Partial runs F"). Backends inherit the postmaster's
 * affinity, so the ones opened later are pinned too; every process is given all cores back at exit.
 */
export const POSTGRES_CORE = process.env.BENCH_POSTGRES_CORE ?? 'load';

export function postgresPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

export function pinPostgres(cpus: string): void {
  for (const pid of postgresPids()) {
    try {
      execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      // exited meanwhile, or not ours to pin (then it runs where the scheduler puts it)
    }
  }
}

export function placePostgres(): string {
  if (cores < 2 || POSTGRES_CORE === 'none') return 'PostgreSQL not pinned';
  if (POSTGRES_CORE !== 'load' && POSTGRES_CORE !== 'server')
    throw new Error(`BENCH_POSTGRES_CORE must be load, server or none, not ${POSTGRES_CORE}`);
  const core = POSTGRES_CORE === 'load' ? LOAD_CORE : SERVER_CORE;
  pinPostgres(core);
  process.on('exit', () => pinPostgres(`0-${cores - 1}`));
  process.on('SIGINT', () => process.exit(130));
  process.on('SIGTERM', () => process.exit(143));
  return `PostgreSQL on core ${core}`;
}

export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}
