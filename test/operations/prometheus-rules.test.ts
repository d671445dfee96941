// deploy/prometheus/ as operators test theirs (docs/operations.md#objectives): the rules load
// (promtool check rules), each alert fires on the series that should make it fire and stays quiet
// on the others (promtool test rules, the test files beside the rules), the shipped file is what
// scripts/prometheus-rules.ts writes at time scale 1, and every alert has its summary,
// description and a runbook link to a section of docs/runbook.md.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { alertNames, RULES_FILE, ruleFiles, ruleGroups, SHIPPED_DIR } from '../../scripts/prometheus-rules.js';
import { prometheusUnavailable, promtool } from '../support/prometheus.js';
import { required } from '../support/required.js';

const TESTS = ['resource-api.rules.test.yml', 'resource-api.alerts.test.yml'];
const runbook = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'runbook.md'), 'utf8');

const shipped = readFileSync(join(SHIPPED_DIR, RULES_FILE), 'utf8');
const rules = ruleGroups().flatMap((g) => g.rules);
const nameOf = (r: (typeof rules)[number]) => ('alert' in r ? r.alert : r.record);

describe('deploy/prometheus/', () => {
  it('is what scripts/prometheus-rules.ts writes at time scale 1 (npm run prometheus-rules)', async () => {
    expect((await ruleFiles())[RULES_FILE]).toBe(shipped);
  });

  it('gives every alert a summary, a description and a link to its section of docs/runbook.md', () => {
    const alerts = rules.flatMap((r) => ('alert' in r ? [r] : []));
    expect(alerts.length).toBeGreaterThan(10);
    expect(new Set(alerts.map((a) => a.alert))).toEqual(new Set(alertNames()));
    for (const alert of alerts) {
      expect(Object.keys(alert.annotations).sort(), alert.alert).toEqual(['description', 'runbook_url', 'summary']);
      expect(alert.annotations.summary.length, alert.alert).toBeGreaterThan(20);
      expect(alert.annotations.description.length, alert.alert).toBeGreaterThan(40);
      expect(alert.annotations.runbook_url.split('#')[1], alert.alert).toBe(alert.alert.toLowerCase());
      expect(runbook, alert.alert).toMatch(new RegExp(`^## ${alert.alert}$`, 'm'));
    }
  });

  it('scales every window and wait, and nothing else, by the time scale', async () => {
    const fast = (await ruleFiles({ timeScale: 60 }))[RULES_FILE] as string;
    const scaledRules = ruleGroups({ timeScale: 60 }).flatMap((g) => g.rules);
    const ranges = (text: string) => [...text.matchAll(/\[(\w+)\]/g)].map((m) => m[1]);
    expect(ranges(fast)).not.toContain('5m');
    expect(ranges(fast)).toContain('5s');
    expect(ranges(fast)).toContain('672m'); // 28 days
    expect(scaledRules.map(nameOf)).toEqual(rules.map(nameOf));
    const withoutWindows = (r: (typeof rules)[number]) => ({ ...r, expr: r.expr.replace(/\[\w+\]/g, '[]'), for: '' });
    expect(scaledRules.map(withoutWindows)).toEqual(rules.map(withoutWindows));
    expect(scaledRules.find((r) => nameOf(r) === 'ResourceApiShedding')).toMatchObject({ for: '5s' });
  });
});

describe.runIf(required('test/operations/prometheus-rules.test.ts', prometheusUnavailable))('promtool', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'resource-api-rules-'));
  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  it('checks the rules (promtool check rules)', () => {
    const { status, output } = promtool(['check', 'rules', RULES_FILE], SHIPPED_DIR);
    expect(status, output).toBe(0);
    expect(output).toContain('SUCCESS');
  });

  it('checks the rules at time scale 60 too (the end-to-end test runs those)', async () => {
    const dir = join(scratch, 'scaled');
    mkdirSync(dir);
    writeFileSync(join(dir, RULES_FILE), (await ruleFiles({ timeScale: 60 }))[RULES_FILE] as string);
    const { status, output } = promtool(['check', 'rules', RULES_FILE], dir);
    expect(status, output).toBe(0);
  });

  it('passes its unit tests: each alert fires and stays quiet where it should (promtool test rules)', () => {
    const { status, output } = promtool(['test', 'rules', ...TESTS], SHIPPED_DIR);
    expect(status, output).toBe(0);
    expect(output.match(/SUCCESS/g)).toHaveLength(TESTS.length);
  }, 120_000);

  it('fails them when an indicator counts what it should not (a readiness 503 as a failed request)', () => {
    // The same tests against rules whose availability forgets to leave the probes out.
    writeFileSync(join(scratch, RULES_FILE), shipped.replaceAll(',route!~"/api/public/health/.*"', ''));
    copyFileSync(join(SHIPPED_DIR, 'resource-api.rules.test.yml'), join(scratch, 'resource-api.rules.test.yml'));
    const { status, output } = promtool(['test', 'rules', 'resource-api.rules.test.yml'], scratch);
    expect(status).not.toBe(0);
    expect(output).toContain('job:resource_api_availability_errors:ratio_rate5m');
  });
});
