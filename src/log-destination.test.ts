import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { TurnBatchedDestination } from './log-destination.js';

const dir = mkdtempSync(join(tmpdir(), 'log-destination-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A stand-in for sonic-boom that records what it is handed. */
function recorder() {
  const writes: string[] = [];
  const target = {
    write: (s: string) => writes.push(s) > 0,
    flush: (cb?: () => void) => cb?.(),
    flushSync: () => {},
    end: () => {},
  };
  return { writes, target: target as unknown as ConstructorParameters<typeof TurnBatchedDestination>[0] };
}

const nextTurn = () => new Promise((r) => setImmediate(r));

describe('TurnBatchedDestination', () => {
  it('hands the lines of one event-loop turn over as one string, in order', async () => {
    const { writes, target } = recorder();
    const log = pino({ base: null, timestamp: false }, new TurnBatchedDestination(target));

    log.info({ n: 1 }, 'a');
    log.info({ n: 2 }, 'b');
    log.info({ n: 3 }, 'c');
    expect(writes).toEqual([]);
    await nextTurn();
    log.info({ n: 4 }, 'd');
    await nextTurn();

    expect(writes).toEqual([
      '{"level":30,"n":1,"msg":"a"}\n{"level":30,"n":2,"msg":"b"}\n{"level":30,"n":3,"msg":"c"}\n',
      '{"level":30,"n":4,"msg":"d"}\n',
    ]);
  });

  it('hands the waiting lines over on flush', () => {
    const { writes, target } = recorder();
    const log = pino({ base: null, timestamp: false }, new TurnBatchedDestination(target));

    log.info('a');
    log.flush();

    expect(writes).toEqual(['{"level":30,"msg":"a"}\n']);
  });

  it('writes the lines of the last turn when the process exits within it', () => {
    const file = join(dir, 'exit.log');
    // A process that logs and exits in the same turn, through the production destination.
    const program = `
      import { openSync } from 'node:fs';
      import { pino } from 'pino';
      import { logDestination } from './src/log-destination.ts';
      const log = pino({ base: null, timestamp: false }, logDestination(openSync(${JSON.stringify(file)}, 'w')));
      for (let i = 1; i <= 3; i++) log.info({ i }, 'line');
      process.exit(0);
    `;
    execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', program], {
      cwd: join(import.meta.dirname, '..'),
    });

    expect(readFileSync(file, 'utf8')).toBe([1, 2, 3].map((i) => `{"level":30,"i":${i},"msg":"line"}\n`).join(''));
  });
});
