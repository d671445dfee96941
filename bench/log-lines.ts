// npm run bench:log — what writing the request log line costs, in CPU µs per line, through
// sonic-boom alone (pino.destination with the service's options) and through the service's
// destination, which hands sonic-boom the lines of each event-loop turn as one string
// (src/log-destination.ts). The line is the service's request line; requests finish in
// bursts, so the lines come 4, 16 or 64 to a turn. Both write to a file. Last, the same line
// with the trace's ids (`trace_id`, `span_id`: what tracing adds to every line, sampled or not)
// against without them, through the service's destination, 16 lines a turn.
import { openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { SONIC_BOOM_OPTIONS, TurnBatchedDestination } from '../src/log-destination.js';
import { percentile } from './lib/open-loop.js';

const LINES = Number(process.env.BENCH_ITERATIONS ?? 300_000);
const ROUNDS = 5;
const nextTurn = () => new Promise((r) => setImmediate(r));

function destination(kind: 'sonic-boom' | 'turn-batched', file: string) {
  const sonic = pino.destination({ dest: openSync(file, 'w'), ...SONIC_BOOM_OPTIONS });
  return kind === 'sonic-boom' ? sonic : new TurnBatchedDestination(sonic);
}

/** CPU µs per line over `lines` lines, `perTurn` to a turn, the writes they leave behind included. */
async function measure(log: pino.Logger, lines: number, perTurn: number, ids = false): Promise<number> {
  const trace = ids ? { trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' } : undefined;
  const start = process.cpuUsage();
  for (let i = 0; i < lines; i += perTurn) {
    for (let j = 0; j < perTurn; j++) {
      const n = i + j;
      log.info(
        {
          requestId: `3f0c6a2e-9b1d-4c55-8e2a-${String(n).padStart(12, '0')}`,
          method: 'GET',
          url: `/api/v1/users/${(n % 1000) + 1}`,
          statusCode: 200,
          responseTime: 1.23,
          ...trace, // as the service's access line adds them (http/request-context.ts)
        },
        'request completed',
      );
    }
    await nextTurn();
  }
  await new Promise((r) => setTimeout(r, 200)); // the last batches' writes
  const used = process.cpuUsage(start);
  return (used.user + used.system) / lines;
}

console.log(`${LINES} lines a run, median of ${ROUNDS} runs, Node ${process.version}\n`);
for (const perTurn of [4, 16, 64]) {
  const results: string[] = [];
  for (const kind of ['sonic-boom', 'turn-batched'] as const) {
    const file = join(tmpdir(), `bench-log-${process.pid}-${kind}.log`);
    const log = pino({ level: 'info' }, destination(kind, file));
    await measure(log, 50_000, perTurn); // warm up
    const runs: number[] = [];
    for (let r = 0; r < ROUNDS; r++) runs.push(await measure(log, LINES, perTurn));
    const median = percentile(runs, 50);
    results.push(`${kind} ${median.toFixed(2)} µs/line`);
    rmSync(file, { force: true });
  }
  console.log(`${String(perTurn).padStart(2)} lines a turn: ${results.join(', ')}`);
}

// The trace's ids on the line: the two alternate run by run, so that the host's drift falls on both.
{
  const file = join(tmpdir(), `bench-log-${process.pid}-ids.log`);
  const log = pino({ level: 'info' }, destination('turn-batched', file));
  await measure(log, 50_000, 16, true); // warm up
  const runs = { without: [] as number[], with: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    runs.without.push(await measure(log, LINES, 16));
    runs.with.push(await measure(log, LINES, 16, true));
  }
  console.log(
    `16 lines a turn, turn-batched: without the trace's ids ${percentile(runs.without, 50).toFixed(2)} µs/line, with them ${percentile(runs.with, 50).toFixed(2)} µs/line`,
  );
  rmSync(file, { force: true });
}
process.exit(0);
