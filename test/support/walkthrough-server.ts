// A fresh service for the walk-throughs of docs/ (test/processes/api-guide.test.ts): development mode on
// an in-memory database, with a DATA_DIR of its own (its secrets, the mails it keeps), and the
// commands rewritten to reach it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runServer, type ServerProcess } from './process.js';
import { TEST_ENCRYPTION_KEY, TEST_JWT_SECRET } from './test-app.js';

export interface WalkthroughServer {
  server: ServerProcess;
  /** The environment of the bash session: the docs' commands sign tokens with the server's secret. */
  env: Record<string, string>;
  /** A command as the docs show it → as it runs here. */
  rewrite: (command: string) => string;
  stop(): Promise<void>;
}

export async function startWalkthroughServer(): Promise<WalkthroughServer> {
  const dir = mkdtempSync(join(tmpdir(), 'resource-api-walk-'));
  const started = runServer({
    NODE_ENV: 'development',
    // The URLs in answers (Location, Link, problem types) read as the docs show them.
    BASE_URL: 'http://localhost:8080',
    DATABASE_URL: 'memory://',
    DATA_DIR: dir,
    RATE_LIMIT_PER_MINUTE: '0',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
  });
  const server = await started.ready;
  const { port } = new URL(server.url);
  return {
    server,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? dir,
      NODE_ENV: 'development',
      DATA_DIR: dir,
      PORT: port,
      JWT_SECRET: TEST_JWT_SECRET,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    },
    rewrite: (command) => command.replaceAll('localhost:8080', `127.0.0.1:${port}`),
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
