// vitest's setup file (vitest.config.ts): after each test file, every app of buildTestApp's still
// open is closed, one after another (test/support/app-registry.ts).
import { afterAll } from 'vitest';
import { openApps } from './app-registry.js';

afterAll(async () => {
  for (const close of [...openApps]) await close();
});
