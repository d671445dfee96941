// The embedded database is one process's: a second process opening the same DATA_DIR would
// corrupt it. A lock file holding the owner's pid keeps a second `npm start` (or
// `npm run migrate` beside a running server) out; a lock whose process is gone is taken over.
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export class DataDirInUse extends Error {
  override readonly name = 'DataDirInUse';
}

const LOCK_FILE = 'resource-api.lock';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the directory's lock, or throws DataDirInUse naming the process that holds it. */
export function lockDataDir(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw new DataDirInUse(
          `The embedded database in ${dir} is in use by process ${owner}; stop it first, or set DATA_DIR or DATABASE_URL`,
        );
      }
      rmSync(path, { force: true }); // stale: its process is gone
    }
  }
  throw new DataDirInUse(`Could not lock the embedded database in ${dir}`);
}
