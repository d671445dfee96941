// The bench's tracing mode builds its baseline from HEAD with bench/patches/without-tracing.patch
// applied (modes/tracing.ts), and refuses to run when the patch no longer applies: a change to a
// file the patch touches must carry the patch along, and this test says so when it does not.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const patches = readdirSync(join(root, 'bench/patches')).filter((name) => name.endsWith('.patch'));

describe("the bench's patches", () => {
  it('are there', () => {
    expect(patches).toContain('without-tracing.patch');
  });

  it.each(patches)('%s applies to this tree', (name) => {
    const check = () =>
      execFileSync('git', ['apply', '--check', join(root, 'bench/patches', name)], { cwd: root, stdio: 'pipe' });
    expect(check).not.toThrow();
  });
});
