// The walk-throughs in docs/ as a test runs them: every `$ ` command of a ```console block, in
// order, in one bash session (variables carry from one command to the next), against a running
// service; what follows a command up to the next one is what it printed when the docs were
// written, of which the status line of an HTTP answer is compared.
import { spawn } from 'node:child_process';

export interface Step {
  /** The command as the docs show it (continuation lines joined with their backslashes). */
  command: string;
  /** The lines the docs show after it. */
  shown: string[];
}

export interface Ran extends Step {
  /** What it printed (CRLF normalised), and its exit status. */
  printed: string[];
  status: number;
}

/** Every command of the ```console blocks of `markdown`, in order. */
export function walkthroughSteps(markdown: string): Step[] {
  const steps: Step[] = [];
  let inBlock = false;
  let current: Step | undefined;
  let continued = false;
  for (const line of markdown.split('\n')) {
    if (!inBlock) {
      if (line.trim() === '```console') inBlock = true;
      continue;
    }
    if (line.trim() === '```') {
      inBlock = false;
      current = undefined;
      continue;
    }
    if (continued && current !== undefined) {
      current.command += `\n${line}`;
    } else if (line.startsWith('$ ')) {
      current = { command: line.slice(2), shown: [] };
      steps.push(current);
    } else if (current !== undefined) {
      current.shown.push(line);
    }
    continued = (line.startsWith('$ ') || continued) && line.endsWith('\\');
  }
  return steps;
}

/** The first HTTP status line among `lines` ("HTTP/1.1 201 Created"), if any. */
export function statusLine(lines: readonly string[]): string | undefined {
  return lines.find((l) => /^HTTP\/1\.1 \d{3}/.test(l))?.trim();
}

/** Runs `steps` in one bash session with `env`; `rewrite` may change a command before it runs. */
export async function runWalkthrough(
  steps: readonly Step[],
  env: Record<string, string>,
  rewrite: (command: string) => string = (c) => c,
): Promise<Ran[]> {
  const marker = `@@walkthrough-${String(process.pid)}`;
  // What a command shows on standard error is part of what it printed (the guide's `created`
  // shows an answer there while its id goes into a variable).
  const script =
    'exec 2>&1\n' +
    steps
      .map(
        (step, i) =>
          `printf '\\n${marker} %d\\n' ${String(i)}\n${rewrite(step.command)}\nprintf '\\n${marker}-status %d\\n' $?`,
      )
      .join('\n');
  const output = await new Promise<string>((resolve, reject) => {
    const bash = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    bash.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    bash.on('error', reject);
    bash.on('exit', () => resolve(text.replaceAll('\r\n', '\n')));
  });
  return steps.map((step, i) => {
    const start = output.indexOf(`\n${marker} ${String(i)}\n`);
    const end = output.indexOf(`\n${marker}-status `, start);
    if (start === -1 || end === -1) return { ...step, printed: [], status: -1 };
    const printed = output.slice(start + `\n${marker} ${String(i)}\n`.length, end).split('\n');
    const status = Number(/^\S+ (\d+)/.exec(output.slice(end + 1))?.[1] ?? -1);
    return { ...step, printed, status };
  });
}
