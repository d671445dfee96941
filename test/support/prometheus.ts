// Debian's Prometheus (the server and promtool, package `prometheus`) for the operations tests
// (docs/operations.md#objectives): found on the PATH, run as a process of the test's own on a
// loopback port with a temporary configuration and storage, and asked over its HTTP API.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './private-postgres.js';
import { until } from './until.js';

function onPath(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

/** Why Prometheus cannot run here (for required()), or undefined when it can. */
export const prometheusUnavailable: string | undefined = ['promtool', 'prometheus'].every(onPath)
  ? undefined
  : 'promtool and prometheus are not on the PATH (apt-get install prometheus)';

/** Runs promtool; its exit status and output (stdout and stderr together). */
export function promtool(args: string[], cwd: string): { status: number; output: string } {
  try {
    const output = execFileSync('promtool', args, { cwd, stdio: 'pipe', encoding: 'utf8' });
    return { status: 0, output };
  } catch (error) {
    const { status, stdout, stderr } = error as { status: number; stdout: string; stderr: string };
    return { status, output: `${stdout}${stderr}` };
  }
}

export interface Alert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

export interface PrometheusServer {
  url: string;
  /** An instant query's result (throws on a query Prometheus refuses). */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  /** The alerts pending or firing now. */
  alerts(): Promise<Alert[]>;
  /** Each target's health and last scrape error, and Prometheus's log's last lines (for a failure's message). */
  diagnosis(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Starts Prometheus scraping `targets` (host:port) every second, with `rules` (file name → text)
 * evaluated every second.
 */
export async function startPrometheus(targets: string[], rules: Record<string, string>): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), 'resource-api-prometheus-'));
  for (const [name, text] of Object.entries(rules)) writeFileSync(join(dir, name), text);
  writeFileSync(
    join(dir, 'prometheus.yml'),
    [
      'global: { scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }',
      `rule_files: [${Object.keys(rules).join(', ')}]`,
      'scrape_configs:',
      '  - job_name: resource-api',
      `    static_configs: [{ targets: [${targets.map((t) => `'${t}'`).join(', ')}] }]`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let log = '';
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-10_000)));
  // A test process that ends before stop() leaves no Prometheus behind.
  process.once('exit', () => child.kill('SIGKILL'));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = until(
    'Prometheus ready',
    async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${log}`);
      return fetch(`${url}/-/ready`).then(
        (r) => r.ok,
        () => false,
      );
    },
    30_000,
  );
  await ready.catch((error: unknown) => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}${path}`);
    const body = (await response.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? response.status}`);
    return body.data;
  };
  return {
    url,
    query: async (expr) =>
      (
        await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
          `/api/v1/query?query=${encodeURIComponent(expr)}`,
        )
      ).result,
    alerts: async () => (await api<{ alerts: Alert[] }>('/api/v1/alerts')).alerts,
    diagnosis: async () => {
      const { activeTargets } = await api<{
        activeTargets: { scrapeUrl: string; health: string; lastError: string }[];
      }>('/api/v1/targets');
      const targets = activeTargets.map((t) => `${t.scrapeUrl}: ${t.health} ${t.lastError}`).join('; ');
      return `targets: ${targets}; log: ${log.slice(-2000)}`;
    },
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
