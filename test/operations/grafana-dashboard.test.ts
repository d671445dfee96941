// deploy/grafana/resource-api.json (docs/operations.md#alerts-and-the-dashboard): what
// scripts/grafana-dashboard.ts writes, provisionable as it is (no import-time inputs, a fixed
// uid, its data source a variable), every panel placed on the grid and querying Prometheus.
// test/operations/prometheus.test.ts runs each query against a Prometheus scraping the service.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DASHBOARD_FILE, dashboardText } from '../../scripts/grafana-dashboard.js';

interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { refId: string; expr: string; datasource: { uid: string } }[];
}

const shipped = readFileSync(DASHBOARD_FILE, 'utf8');
const model = JSON.parse(shipped) as {
  uid: string;
  title: string;
  __inputs?: unknown;
  templating: { list: { name: string; type: string }[] };
  panels: Panel[];
};

describe('deploy/grafana/resource-api.json', () => {
  it('is what scripts/grafana-dashboard.ts writes (npm run grafana-dashboard)', async () => {
    expect(await dashboardText()).toBe(shipped);
  });

  it('is provisionable as it is: a fixed uid, no import inputs, the data source and job as variables', () => {
    expect(model.uid).toBe('resource-api');
    expect(model.__inputs).toBeUndefined();
    expect(model.templating.list.map((v) => [v.name, v.type])).toEqual([
      ['datasource', 'datasource'],
      ['job', 'query'],
      ['instance', 'query'],
    ]);
    expect(shipped).not.toMatch(/\$\{DS_/); // an exported dashboard's import placeholders
  });

  it('has the rows an operator looks for, each panel on the grid, described, querying through the variable', () => {
    const rows = model.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows).toEqual([
      'Objectives (28 days)',
      'Traffic',
      'Errors',
      'Latency',
      'Saturation',
      'Webhooks and event streams',
      'Read replicas',
    ]);
    expect(new Set(model.panels.map((p) => p.id)).size).toBe(model.panels.length);
    const cells = new Set<string>();
    for (const panel of model.panels.filter((p) => p.type !== 'row')) {
      const { x, y, w, h } = panel.gridPos;
      expect(x + w, panel.title).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++)
        for (let j = y; j < y + h; j++) {
          expect(cells.has(`${i},${j}`), `${panel.title} overlaps another panel`).toBe(false);
          cells.add(`${i},${j}`);
        }
      expect(panel.description?.length, panel.title).toBeGreaterThan(10);
      expect(panel.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) expect(target.datasource.uid).toBe('${datasource}');
    }
  });
});
