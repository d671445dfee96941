import { configDefaults, defineConfig } from 'vitest/config';

// One run covers every engine: the unit tests, the HTTP suite on the embedded engine, and the
// same suite again on PostgreSQL when TEST_DATABASE_URL is set (.ci/run sets it). The tests that
// start processes of their own (the server, PostgreSQL clusters, a browser, a shell) are a
// project of their own per engine, `<engine>-processes`, so that the rest runs alone in
// seconds: `npx vitest run --project pglite`. The image's test is a project of its own, left out of
// `npm test` (`--project '!image'`).
const engines = ['pglite', ...(process.env.TEST_DATABASE_URL ? ['postgres'] : [])];

export default defineConfig({
  test: {
    allowOnly: !process.env.CI,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Apps that a test built where no afterAll of theirs runs are closed after the file.
    setupFiles: ['test/support/close-apps.ts'],
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      exclude: ['src/**/*.test.ts'],
      thresholds: { lines: 85, functions: 85, branches: 75, statements: 85 },
    },
    projects: [
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts', 'bench/**/*.test.ts'] } },
      // deploy/prometheus/ and deploy/grafana/ with Debian's promtool and Prometheus; the tests that
      // run the service against Prometheus need PostgreSQL (TEST_DATABASE_URL) and skip without it.
      { extends: true, test: { name: 'operations', include: ['test/operations/**/*.test.ts'] } },
      ...engines.flatMap((engine) => [
        {
          extends: true as const,
          test: {
            name: engine,
            include: ['test/**/*.test.ts'],
            exclude: [...configDefaults.exclude, 'test/processes/**', 'test/image/**', 'test/operations/**'],
            env: { TEST_ENGINE: engine },
          },
        },
        {
          extends: true as const,
          test: { name: `${engine}-processes`, include: ['test/processes/**/*.test.ts'], env: { TEST_ENGINE: engine } },
        },
      ]),
      // The image built and run with podman (test/image/): not part of `npm test` (it takes minutes
      // and podman), run by `npm run test:image` and by CI in a phase of its own.
      {
        extends: true,
        test: { name: 'image', include: ['test/image/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 420_000 },
      },
    ],
  },
});
