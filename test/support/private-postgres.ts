// A throwaway PostgreSQL cluster of the test's own (initdb in a temp dir, its own port), so a
// test can stop and start the server under a running service without touching anyone else's.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function findBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'pg_ctl'))) return join(root, v, 'bin');
  return undefined;
}

const bin = findBin();
const isRoot = process.getuid?.() === 0;

/** Why a private cluster cannot be made here, or undefined when it can. */
export const privatePostgresUnavailable: string | undefined =
  bin === undefined ? 'no PostgreSQL server binaries under /usr/lib/postgresql' : undefined;

/** A port free right now on 127.0.0.1 (for a server that must be told its port before it starts). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface PrivatePostgres {
  url: string;
  start(): void;
  stop(): void;
  destroy(): void;
}

export async function createPrivatePostgres(): Promise<PrivatePostgres> {
  if (bin === undefined) throw new Error(privatePostgresUnavailable);
  const dir = mkdtempSync(join(tmpdir(), 'resource-api-pg-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  const port = await freePort();
  // initdb and postgres refuse to run as root; run them as the postgres user then.
  const run = (cmd: string, args: string[]) =>
    isRoot
      ? execFileSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { stdio: 'pipe' })
      : execFileSync(join(bin, cmd), args, { stdio: 'pipe' });
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const pg: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start: () => run('pg_ctl', ['-D', data, '-o', options, '-w', '-l', join(dir, 'log'), 'start']),
    stop: () => run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
    destroy: () => {
      try {
        pg.stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  pg.start();
  return pg;
}

/** Runs a PostgreSQL tool as the postgres user when this process is root (the tools refuse root). */
function runTool(cmd: string, args: string[]): Buffer {
  if (bin === undefined) throw new Error(privatePostgresUnavailable);
  return isRoot
    ? execFileSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { stdio: 'pipe' })
    : execFileSync(join(bin, cmd), args, { stdio: 'pipe' });
}

export interface Cluster {
  port: number;
  url: string;
  data: string;
  start(): void;
  /** Every process of the cluster killed with SIGKILL, as a crash would. */
  crash(): void;
  stop(): void;
}

function cluster(dir: string, name: string, port: number, settings: string[]): Cluster {
  const data = join(dir, name);
  const options = [`-p ${port}`, `-k ${dir}`, '-c listen_addresses=127.0.0.1', ...settings.map((s) => `-c ${s}`)].join(
    ' ',
  );
  return {
    port,
    data,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start: () => runTool('pg_ctl', ['-D', data, '-o', options, '-w', '-l', join(dir, `${name}.log`), 'start']),
    crash: () => {
      const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      // The postmaster and each of its children, at once.
      const children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
      for (const p of [pid, ...children.map(Number)]) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
    stop: () => runTool('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
  };
}

export interface ReplicatedPostgres {
  primary: Cluster;
  standby: Cluster;
  /** Both hosts, as libpq lists them, writing only to the one that accepts writes. */
  url: string;
  /** Makes the standby synchronous: a commit returns once the standby has it. */
  synchronous(): Promise<void>;
  promote(): void;
  destroy(): void;
}

/**
 * A primary and a streaming standby (pg_basebackup -R), each a throwaway cluster on its own
 * loopback port: for failover and replica tests. `standbySettings`, e.g.
 * `recovery_min_apply_delay=2s`, make a standby that applies WAL late.
 */
export async function createReplicatedPostgres(standbySettings: string[] = []): Promise<ReplicatedPostgres> {
  if (bin === undefined) throw new Error(privatePostgresUnavailable);
  const dir = mkdtempSync(join(tmpdir(), 'resource-api-pair-'));
  chmodSync(dir, 0o777);
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const common = ['fsync=off', 'wal_level=replica', 'max_wal_senders=5', 'hot_standby=on'];
  const primary = cluster(dir, 'primary', primaryPort, common);
  const standby = cluster(dir, 'standby', standbyPort, [...common, ...standbySettings]);
  const destroy = () => {
    for (const c of [primary, standby]) {
      try {
        c.stop();
      } catch {
        // stopped, crashed, or never started
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    runTool('initdb', ['-D', primary.data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
    primary.start();
    runTool('pg_basebackup', [
      ...['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres'],
      ...['-D', standby.data, '-R', '-X', 'stream', '--checkpoint=fast'],
    ]);
    standby.start();
  } catch (error) {
    // A pair that could not be built leaves no server running and no directory behind.
    destroy();
    throw error;
  }
  const psql = (port: number, query: string) =>
    runTool('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-Atc', query])
      .toString()
      .trim();
  return {
    primary,
    standby,
    url: `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/postgres?target_session_attrs=read-write`,
    synchronous: async () => {
      // Only once the standby streams: before, every commit would wait for it.
      for (
        let i = 0;
        psql(primaryPort, "select count(*) from pg_stat_replication where state = 'streaming'") !== '1';
        i++
      ) {
        if (i > 100) throw new Error('the standby does not stream');
        await new Promise((r) => setTimeout(r, 100));
      }
      psql(primaryPort, "alter system set synchronous_standby_names = '*'");
      psql(primaryPort, 'select pg_reload_conf()');
    },
    promote: () => runTool('pg_ctl', ['-D', standby.data, '-w', 'promote']),
    destroy,
  };
}
