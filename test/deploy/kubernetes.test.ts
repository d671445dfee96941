// deploy/kubernetes/: every manifest is valid against Kubernetes' own schemas (kubernetes-models,
// generated from the Kubernetes OpenAPI document: its validators for values, and its types for
// field names, which the schema alone leaves open), and the manifests keep the rules
// docs/deployment.md states: probes on paths the service serves, with time-outs above its own,
// a grace period above the preStop pause and SHUTDOWN_TIMEOUT_MS, the restricted security
// context, the image's user, the keys only in a Secret, and the parts naming each other.
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { EnvSchema, loadConfig } from '../../src/config/config.js';
import { READY_WITHIN_MS } from '../../src/db/database.js';
import { buildTestApp, engine, TEST_ENCRYPTION_KEY, TEST_JWT_SECRET } from '../support/test-app.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DIR = join(ROOT, 'deploy/kubernetes');

interface Manifest {
  file: string;
  doc: Record<string, unknown> & { apiVersion: string; kind: string; metadata: { name: string } };
}

const manifests: Manifest[] = readdirSync(DIR, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => {
      if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
      return { file, doc: d.toJSON() as Manifest['doc'] };
    }),
  );
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- read as YAML; the schema checks above type them
const of = (kind: string) => manifests.filter((m) => m.doc.kind === kind).map((m) => m.doc as any);
const one = (kind: string) => {
  const [found, ...more] = of(kind);
  expect(more, `one ${kind}`).toEqual([]);
  return found;
};

/** The kubernetes-models module of a manifest's type: `apps/v1` + `Deployment`. */
const modelPath = ({ apiVersion, kind }: Manifest['doc']) => `kubernetes-models/${apiVersion}/${kind}`;

/**
 * TypeScript's excess-property check of each manifest as an object literal of its model's type:
 * a misspelt or misplaced field (`readinesProbe`, `sleep` under `postStart.exec`) is an error.
 */
function fieldErrors(list: Manifest[]): string[] {
  const file = join(ROOT, '.kubernetes-manifests.check.ts');
  const text = list
    .map(
      (m, i) =>
        `import type { I${m.doc.kind} as T${i} } from '${modelPath(m.doc)}';\n` +
        `// ${m.file}\nexport const m${i}: T${i} = ${JSON.stringify(m.doc, null, 2)};\n`,
    )
    .join('\n');
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, ...rest) =>
    name === file ? ts.createSourceFile(name, text, version) : getSourceFile(name, version, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where =
      d.file?.fileName === file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const manifest =
      where === undefined
        ? ''
        : (text
            .split('\n')
            .slice(0, where.line)
            .reverse()
            .find((l) => l.startsWith('// ')) ?? '');
    return `${manifest.slice(3)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe.runIf(engine === 'pglite')('deploy/kubernetes/', () => {
  it('holds a Deployment, a Service, a PodDisruptionBudget, an autoscaler, a ConfigMap and an example Secret', () => {
    expect(manifests.map((m) => `${m.file}: ${m.doc.kind}`)).toEqual([
      'configmap.yaml: ConfigMap',
      'deployment.yaml: Deployment',
      'examples/secret.yaml: Secret',
      'horizontalpodautoscaler.yaml: HorizontalPodAutoscaler',
      'migrate-job.yaml: Job',
      'poddisruptionbudget.yaml: PodDisruptionBudget',
      'service.yaml: Service',
    ]);
  });

  it.each(manifests.map((m) => [`${m.file} (${m.doc.kind})`, m] as const))(
    '%s is valid against the Kubernetes schema',
    async (_, manifest) => {
      const module = (await import(modelPath(manifest.doc))) as Record<
        string,
        new (data: unknown) => { validate(): void }
      >;
      const Model = module[manifest.doc.kind];

      expect(Model).toBeDefined();
      expect(() => new Model!(manifest.doc).validate()).not.toThrow();
    },
  );

  it('names no field Kubernetes does not know', () => {
    expect(fieldErrors(manifests)).toEqual([]);
  }, 60_000);

  describe('the Deployment', () => {
    const deployment = one('Deployment');
    const pod = deployment.spec.template.spec;
    const [container] = pod.containers;
    const config = one('ConfigMap').data as Record<string, string>;
    const probes = ['startupProbe', 'readinessProbe', 'livenessProbe'].map((name) => [name, container[name]] as const);
    const keys = { JWT_SECRET: TEST_JWT_SECRET, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, DATABASE_URL: 'postgres://h/db' };
    let paths: Record<string, Record<string, unknown>> = {};

    beforeAll(async () => {
      const { app } = await buildTestApp();
      paths = (await app.inject({ url: '/api/public/openapi.json' })).json().paths;
    });

    it('probes paths of the OpenAPI document the app serves, on a port it names', () => {
      for (const [name, probe] of probes) {
        expect(probe, name).toBeDefined();
        expect(paths[probe.httpGet.path]?.get, `${name} ${probe.httpGet.path}`).toBeDefined();
        expect(container.ports.map((p: { name: string }) => p.name)).toContain(probe.httpGet.port);
      }
      expect(container.readinessProbe.httpGet.path).toBe('/api/public/health/ready');
      expect(container.livenessProbe.httpGet.path).toBe('/api/public/health/live');
    });

    it('gives readiness longer than the service takes to judge the database, and the start long enough to migrate', () => {
      expect(container.readinessProbe.timeoutSeconds * 1000).toBeGreaterThan(READY_WITHIN_MS);
      for (const [name, probe] of probes)
        expect(probe.periodSeconds, name).toBeGreaterThanOrEqual(probe.timeoutSeconds);
      expect(container.startupProbe.periodSeconds * container.startupProbe.failureThreshold).toBeGreaterThanOrEqual(60);
    });

    it('waits longer than the preStop pause and the shutdown time before it kills', () => {
      const shutdownSeconds = loadConfig({ ...config, ...keys }).shutdownTimeoutMs / 1000;
      const pause = container.lifecycle.preStop.sleep.seconds as number;

      expect(pause).toBeGreaterThanOrEqual(5);
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(pause + shutdownSeconds);
    });

    it('runs as the image’s user, restricted: non-root, read-only, no capability, RuntimeDefault seccomp, no token', () => {
      const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
      // The node image's user node is 1000:1000 (the image test checks the running process).
      expect(dockerfile).toMatch(/^USER node$/m);
      for (const spec of [pod, one('Job').spec.template.spec]) {
        expect(spec.automountServiceAccountToken).toBe(false);
        expect(spec.securityContext).toMatchObject({
          runAsNonRoot: true,
          runAsUser: 1000,
          runAsGroup: 1000,
          seccompProfile: { type: 'RuntimeDefault' },
        });
        for (const c of spec.containers)
          expect(c.securityContext).toEqual({
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            runAsNonRoot: true,
            runAsUser: 1000,
            capabilities: { drop: ['ALL'] },
          });
      }
    });

    it('asks for CPU and memory and caps memory', () => {
      expect(container.resources.requests).toEqual({ cpu: expect.any(String), memory: expect.any(String) });
      expect(container.resources.limits.memory).toEqual(expect.any(String));
    });

    it('runs this release’s image, on the ports the configuration names', () => {
      const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      const ports = Object.fromEntries(
        container.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]),
      );

      expect(container.image).toMatch(new RegExp(`:${version.replaceAll('.', '\\.')}$`));
      expect(one('Job').spec.template.spec.containers[0].image).toBe(container.image);
      expect(ports).toEqual({ http: Number(config.PORT), metrics: Number(config.METRICS_PORT) });
    });

    it('takes a configuration the service accepts from the ConfigMap, and the keys and DATABASE_URL from the Secret', () => {
      const secret = one('Secret');
      const sources = container.envFrom.map((e: object) => Object.values(e)[0].name);

      expect(Object.keys(config).filter((k) => !(k in EnvSchema.properties))).toEqual([]);
      expect(() => loadConfig({ ...config, ...keys })).not.toThrow();
      for (const secretName of [
        'JWT_SECRET',
        'JWT_PUBLIC_KEY',
        'JWT_JWKS_URL',
        'ENCRYPTION_KEY',
        'ENCRYPTION_KEY_PREVIOUS',
        'DATABASE_URL',
      ])
        expect(config).not.toHaveProperty(secretName);
      expect(sources).toEqual([one('ConfigMap').metadata.name, secret.metadata.name]);
      expect(Object.keys(secret.stringData).sort()).toEqual(['DATABASE_URL', 'ENCRYPTION_KEY', 'JWT_SECRET']);
      // An example, never a value: every one a placeholder, and only below examples/.
      for (const value of Object.values(secret.stringData)) expect(value).toMatch(/<[^>]+>/);
      expect(
        manifests.filter((m) => m.doc.kind === 'Secret').map((m) => relative('examples', m.file)),
      ).not.toContainEqual(expect.stringMatching(/^\.\./));
    });

    it('is what the Service, the disruption budget and the autoscaler name', () => {
      const labels = deployment.spec.template.metadata.labels;
      const service = one('Service');

      expect(deployment.spec.selector.matchLabels).toEqual(labels);
      expect(service.spec.selector).toEqual(labels);
      expect(service.spec.ports.map((p: { targetPort: string }) => p.targetPort)).toEqual(['http']);
      expect(one('PodDisruptionBudget').spec.selector.matchLabels).toEqual(labels);
      expect(one('HorizontalPodAutoscaler').spec.scaleTargetRef).toEqual({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: deployment.metadata.name,
      });
      expect(deployment.spec.replicas).toBeUndefined(); // the autoscaler's to set
    });
  });
});
