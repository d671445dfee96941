// vitest's setup file (vitest.config.ts): after each test file, every app of buildTestApp's still
// open is closed (test/support/app-registry.ts). Each is closed whatever the others do: one whose
// close fails (its OpenAPI check, say) leaves none of the rest open, and the failures are
// reported together.
import { afterAll } from 'vitest';
import { openApps } from './app-registry.js';

afterAll(async () => {
  const results = await Promise.allSettled([...openApps].map((close) => close()));
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} test apps failed to close`);
});
