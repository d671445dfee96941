// The walks of the docs run as printed: every command, top to bottom, in one bash session
// against a fresh service (development mode, in-memory database), and the guide once more right
// after the README's quick start (its ids come from the answers, never assumed), each command ending well
// (curl's time-out of the stream's last read excepted). docs/api-guide.md: each answer with the
// status line the guide shows. The README's quick start: each answer with the body it shows,
// timestamps aside.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runWalkthrough, statusLine, walkthroughSteps, type Ran } from '../support/walkthrough.js';
import { startWalkthroughServer, type WalkthroughServer } from '../support/walkthrough-server.js';
import { engine } from '../support/test-app.js';

const CURL_TIMED_OUT = 28;

// Once per CI run: it starts its own server on the embedded engine whatever the project.
describe.runIf(engine === 'pglite')('the walks of the docs', () => {
  const walks: WalkthroughServer[] = [];
  afterAll(() => Promise.all(walks.map((w) => w.stop())));
  const read = (file: string) => readFile(join(import.meta.dirname, '..', '..', file), 'utf8');

  /** The guide's steps whose status line is not the one shown, or that did not end well. */
  const differencesOf = (ran: readonly Ran[]) =>
    ran.flatMap((step) => {
      const shown = statusLine(step.shown);
      const printed = statusLine(step.printed);
      const ended = step.status === 0 || (step.status === CURL_TIMED_OUT && step.command.includes('--max-time'));
      return shown === printed && ended
        ? []
        : [{ command: step.command, shown, printed, status: step.status, output: step.printed.slice(0, 8) }];
    });

  it('runs top to bottom on a fresh database with the answers it shows', async () => {
    const steps = walkthroughSteps(await read('docs/api-guide.md'));
    expect(steps.length).toBeGreaterThan(40);
    const walk = await startWalkthroughServer();
    walks.push(walk);
    const ran = await runWalkthrough(steps, walk.env, walk.rewrite);

    expect(differencesOf(ran)).toEqual([]);
    // On a fresh database the versions are the ones shown: each ETag as the guide prints it.
    const etags = (lines: readonly string[]) => lines.filter((l) => /^etag:/i.test(l)).map((l) => l.trim());
    expect(
      ran.filter((s) => JSON.stringify(etags(s.shown)) !== JSON.stringify(etags(s.printed))).map((s) => s.command),
    ).toEqual([]);
    // Every request in the guide shows its answer's status line.
    expect(ran.filter((s) => /^(\w+=\$\()?curl -si/.test(s.command) && statusLine(s.shown) === undefined)).toEqual([]);
  }, 120_000);

  it('runs just as well right after the README’s quick start, in the same shell', async () => {
    const readme = walkthroughSteps(await read('README.md'));
    const guide = walkthroughSteps(await read('docs/api-guide.md'));
    const walk = await startWalkthroughServer();
    walks.push(walk);
    const ran = await runWalkthrough([...readme, ...guide], walk.env, walk.rewrite);

    expect(ran.slice(0, readme.length).filter((step) => step.status !== 0)).toEqual([]);
    expect(differencesOf(ran.slice(readme.length))).toEqual([]);
  }, 120_000);

  it('the README’s quick start runs on a fresh database with the answers it shows', async () => {
    const steps = walkthroughSteps(await read('README.md'));
    expect(steps.length).toBeGreaterThan(3);
    const walk = await startWalkthroughServer();
    walks.push(walk);
    const ran = await runWalkthrough(steps, walk.env, walk.rewrite);

    const withoutTimes = (line: string | undefined): unknown => {
      if (line === undefined || !line.startsWith('{')) return line;
      const fields = JSON.parse(line) as Record<string, unknown>;
      return Object.fromEntries(
        Object.entries(fields).filter(([name]) => name !== 'createdAt' && name !== 'updatedAt'),
      );
    };
    for (const step of ran) {
      expect(step.status, step.command).toBe(0);
      const shown = step.shown.find((l) => l.startsWith('{'));
      if (shown !== undefined)
        expect(withoutTimes(step.printed.find((l) => l.startsWith('{'))), step.command).toEqual(withoutTimes(shown));
    }
  }, 60_000);
});
