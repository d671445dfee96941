// `npm run bench -- --tracing` measures tracing off against this commit without its tracing code
// paths: bench/patches/without-tracing.patch, applied to a worktree of HEAD. A change to a file it
// touches must carry the patch along, or the bench cannot build its baseline: this says so in CI.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

describe('the tracing bench’s baseline', () => {
  it('applies to this tree: bench/patches/without-tracing.patch takes out the tracing code paths', () => {
    const check = () =>
      execFileSync('git', ['apply', '--check', 'bench/patches/without-tracing.patch'], { cwd: root, stdio: 'pipe' });
    expect(check).not.toThrow();
    // It takes out what GET by id runs for tracing: the plugin, the log fields, the handle, the wrappers.
    const patch = execFileSync('git', ['apply', '--stat', 'bench/patches/without-tracing.patch'], {
      cwd: root,
    }).toString();
    for (const file of [
      'src/app.ts',
      'src/http/request-context.ts',
      'src/db/postgres-js-dialect.ts',
      'src/db/prepared.ts',
    ])
      expect(patch).toContain(file);
  });
});
