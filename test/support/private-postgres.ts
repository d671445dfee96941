// A throwaway PostgreSQL cluster of the test's own (initdb in a temp dir, its own port), so a
// test can stop and start the server under a running service without touching anyone else's.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, chmodSync } from 'node:fs';
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

async function freePort(): Promise<number> {
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
