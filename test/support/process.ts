// Runs src/server.ts as a real process (through tsx), for tests of start-up, signals and
// persistence that an in-process app cannot show.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { TEST_ENCRYPTION_KEY, TEST_JWT_SECRET } from './test-app.js';

const ROOT = join(import.meta.dirname, '..', '..');

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** Log lines (parsed JSON) written so far. */
  logs: Record<string, unknown>[];
  exited: Promise<{ code: number | null; stderr: string; ms: number }>;
  signalledAt?: number;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; stderr: string; ms: number }>;
}

export function runServer(env: Record<string, string>): {
  child: ChildProcess;
  exited: ServerProcess['exited'];
  logs: Record<string, unknown>[];
  ready: Promise<ServerProcess>;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'test',
      PORT: '0',
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
      JWT_SECRET: TEST_JWT_SECRET,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let signalledAt = 0;
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string; ms: number }>((resolve) =>
    child.on('exit', (code) => resolve({ code, stderr, ms: signalledAt ? Date.now() - signalledAt : 0 })),
  );
  const ready = new Promise<ServerProcess>((resolve, reject) => {
    let buffer = '';
    child.stdout.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl;
      while ((nl = buffer.indexOf('\n')) !== -1) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          logs.push(entry);
          if (entry.msg === 'resource-api ready') {
            const server: ServerProcess = {
              child,
              url: String(entry.url),
              logs,
              exited,
              stop: async (signal = 'SIGTERM') => {
                signalledAt = Date.now();
                child.kill(signal);
                return exited;
              },
            };
            resolve(server);
          }
        } catch {
          // not a log line
        }
      }
    });
    void exited.then(({ code, stderr }) =>
      reject(new Error(`server exited with ${code} before it was ready: ${stderr}`)),
    );
  });
  ready.catch(() => {}); // a test that expects a failed start awaits `exited` instead
  return { child, exited, logs, ready };
}
