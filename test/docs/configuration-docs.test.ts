// docs/configuration.md documents exactly the variables src/config.ts reads (Lokalise's
// docs:validate): a variable added to one and not the other fails here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EnvSchema } from '../../src/config/config.js';
import { engine } from '../support/test-app.js';

describe.runIf(engine === 'pglite')('docs/configuration.md', () => {
  it('lists every variable of the config schema, and no other', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'configuration.md'), 'utf8');
    const documented = [...doc.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);

    expect(documented.sort()).toEqual(Object.keys(EnvSchema.properties).sort());
  });
});
