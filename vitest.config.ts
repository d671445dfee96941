import { defineConfig } from 'vitest/config';

// One run covers every engine: the unit tests, the HTTP suite on the embedded engine, and the
// same suite again on PostgreSQL when TEST_DATABASE_URL is set (.ci/run sets it).
const engines = ['pglite', ...(process.env.TEST_DATABASE_URL ? ['postgres'] : [])];

export default defineConfig({
  test: {
    allowOnly: !process.env.CI,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      exclude: ['src/**/*.test.ts'],
      thresholds: { lines: 85, functions: 85, branches: 75, statements: 85 },
    },
    projects: [
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts', 'bench/**/*.test.ts'] } },
      ...engines.map((engine) => ({
        extends: true as const,
        test: { name: engine, include: ['test/**/*.test.ts'], env: { TEST_ENGINE: engine } },
      })),
    ],
  },
});
