import { execFileSync, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs, { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { MAX_BUFFERED_BYTES, SONIC_BOOM_OPTIONS, TurnBatchedDestination } from './log-destination.js';

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
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Target = ConstructorParameters<typeof TurnBatchedDestination>[0];

afterEach(() => {
  vi.restoreAllMocks();
});

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

  describe('the periodic flush', () => {
    /** A stand-in for sonic-boom that counts flushes and emits 'write' as sonic-boom does. */
    function flushCounter() {
      const target = Object.assign(new EventEmitter(), {
        flushes: 0,
        write: () => true,
        flush() {
          target.flushes++;
        },
        flushSync: () => {},
        end: () => {},
      });
      return target;
    }

    it('flushes after lines were handed over or a write left bytes behind, and not when idle', async () => {
      const target = flushCounter();
      const destination = new TurnBatchedDestination(target as unknown as Target, { flushEveryMs: 60_000 });
      const log = pino({ base: null, timestamp: false }, destination);

      destination.tick();
      expect(target.flushes).toBe(0); // nothing was ever written

      log.info('a');
      await nextTurn(); // handed over
      destination.tick();
      destination.tick();
      expect(target.flushes).toBe(1);

      target.emit('write', 12_288); // a batch went out; a remainder may be behind it
      destination.tick();
      expect(target.flushes).toBe(2);

      target.emit('write', 0); // the flush of nothing: no remainder
      destination.tick();
      destination.tick();
      expect(target.flushes).toBe(2);
    });

    it('makes no write(2) while idle, yet a line below minLength reaches the file', async () => {
      const writes = vi.spyOn(fs, 'write');
      const file = join(dir, 'idle.log');
      const sonic = pino.destination({ dest: openSync(file, 'w'), ...SONIC_BOOM_OPTIONS });
      const log = pino({ base: null, timestamp: false }, new TurnBatchedDestination(sonic, { flushEveryMs: 10 }));

      log.info('only line');
      for (let i = 0; i < 200 && readFileSync(file, 'utf8') === ''; i++) await sleep(10);
      expect(readFileSync(file, 'utf8')).toBe('{"level":30,"msg":"only line"}\n');

      await sleep(50); // the one flush of nothing that may follow the line's write
      const before = writes.mock.calls.length;
      await sleep(300); // thirty ticks
      expect(writes.mock.calls.length - before).toBe(0);
      sonic.destroy();
    });

    it("(the control) sonic-boom's own periodic flush writes zero bytes on every tick", async () => {
      const writes = vi.spyOn(fs, 'write');
      const sonic = pino.destination({
        dest: openSync(join(dir, 'control.log'), 'w'),
        ...SONIC_BOOM_OPTIONS,
        periodicFlush: 10,
      });
      await sleep(50);
      const before = writes.mock.calls.length;
      await sleep(300);
      expect(writes.mock.calls.length - before).toBeGreaterThanOrEqual(5);
      sonic.destroy();
    });
  });

  describe('a stdout that stalls', () => {
    /** A stand-in for sonic-boom with a bound: refuses (emits 'drop') what would not fit. */
    function boundedTarget(bound: number) {
      const target = Object.assign(new EventEmitter(), {
        buffered: 0,
        write(text: string) {
          if (target.buffered + text.length > bound) target.emit('drop', text);
          else target.buffered += text.length;
          return true;
        },
        /** The descriptor takes `bytes`. */
        drain(bytes: number) {
          target.buffered -= bytes;
          target.emit('write', bytes);
        },
        flush: () => {},
        flushSync: () => {},
        end: () => {},
      });
      return target;
    }

    it('counts the lines it drops and tells them once there is room again, at most once a minute', async () => {
      const target = boundedTarget(1000);
      const told: number[] = [];
      const destination = new TurnBatchedDestination(target as unknown as Target, {
        maxBufferedBytes: 1000,
        onDropped: (lines) => told.push(lines),
        reportEveryMs: 60_000,
      });
      const log = pino({ base: null, timestamp: false }, destination);
      const burst = async (lines: number) => {
        for (let i = 0; i < lines; i++) {
          log.info('x'.repeat(78)); // 100 bytes a line
          await nextTurn();
        }
      };

      await burst(15); // 10 fit, 5 dropped
      target.drain(100); // 900 still waiting: no room to tell yet
      const whileFull = [...told];
      target.drain(500); // 400 waiting
      const once = [...told];
      await burst(20); // fills up again: more dropped
      target.drain(900);
      destination.tick();

      expect(whileFull).toEqual([]);
      expect(once).toEqual([5]);
      expect(told).toEqual([5]); // within the minute: counted, not told again
      expect(destination.droppedLines).toBe(5 + 14);
    });

    it('keeps its memory bounded while stdout is not read, and every line is written or counted as dropped', async () => {
      const total = 400_000;
      // A process logging ~100 MB through the production destination into a pipe its parent does
      // not read; then the parent reads, and the process exits.
      const program = `
        import { pino } from 'pino';
        import { logDestination } from './src/log-destination.ts';
        let log;
        const destination = logDestination(1, {
          onDropped: (lines) => log.warn({ droppedLines: lines }, 'log lines dropped'),
        });
        log = pino({ base: null, timestamp: false }, destination);
        globalThis.gc();
        const before = process.memoryUsage();
        const line = 'x'.repeat(200);
        for (let turn = 0; turn < ${total / 4000}; turn++) {
          for (let i = 0; i < 4000; i++) log.info({ line });
          await new Promise((r) => setImmediate(r));
        }
        globalThis.gc();
        const after = process.memoryUsage();
        process.stderr.write(JSON.stringify({
          dropped: destination.droppedLines,
          grewBytes: after.heapUsed + after.external - before.heapUsed - before.external,
        }) + '\\n');
        process.stdin.once('data', () => process.exit(0));
      `;
      const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', program], {
        cwd: join(import.meta.dirname, '..'),
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      onTestFinished(() => {
        child.kill('SIGKILL');
      });
      child.stdout.pause(); // stdout stalls: the pipe fills and the child's writes wait
      const stats = await new Promise<{ dropped: number; grewBytes: number }>((resolve, reject) => {
        let text = '';
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
          const stats = /^\{"dropped".*$/m.exec(text)?.[0];
          if (stats !== undefined) resolve(JSON.parse(stats) as never);
          else if (text.includes('\n')) reject(new Error(text));
        });
        child.on('exit', (code) => reject(new Error(`exited ${String(code)}: ${text}`)));
      });

      const chunks: string[] = [];
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        const around = `${chunks.at(-1)?.slice(-100) ?? ''}${chunk}`; // the line may span two chunks
        chunks.push(chunk);
        if (around.includes('"msg":"log lines dropped"')) child.stdin.write('exit\n');
      });
      child.stdout.resume();
      await new Promise((resolve) => child.stdout.on('close', resolve));
      const lines = chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '');
      const warned = lines.filter((l) => l.includes('"msg":"log lines dropped"'));

      expect(stats.dropped).toBeGreaterThan(0);
      expect(stats.grewBytes).toBeLessThan(MAX_BUFFERED_BYTES * 2);
      expect(warned).toEqual([`{"level":40,"droppedLines":${String(stats.dropped)},"msg":"log lines dropped"}`]);
      expect(lines.length - warned.length + stats.dropped).toBe(total);
    }, 60_000);
  });
});
