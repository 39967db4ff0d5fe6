import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** `vab-<kind>-<pid>-XXXXXX`: the pid of the process that made it, so another can tell whether it is left. */
const OWNED = /^vab-[a-z-]+-(\d+)-[A-Za-z0-9]{6}$/;
const own = new Set<string>();
let swept = false;

/**
 * A temporary directory for a server's files, this process's own: removed by `removeTempDir`, else when this
 * process exits (a benchmark ends with `process.exit`, a set-up fails before its dispose), else, when it was
 * killed outright (`kill -9`: no handler runs), by the next process of ours that makes one.
 */
export function ownTempDir(kind: string): string {
  if (!swept) {
    swept = true;
    sweepLeftTempDirs();
  }
  if (own.size === 0) process.once('exit', removeOwnTempDirs);
  const dir = mkdtempSync(join(tmpdir(), `vab-${kind}-${process.pid}-`));
  own.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  own.delete(dir);
  if (own.size === 0) process.removeListener('exit', removeOwnTempDirs);
}

/**
 * Removes every directory of this process's (at its exit, or on the signal that ends it). Best effort: a server
 * stopped by the same exit may still write its last files, which the next sweep takes.
 */
export function removeOwnTempDirs(): void {
  for (const dir of own) rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
  own.clear();
}

/** Removes the directories whose process is gone (its pid no longer runs). Returns how many. */
export function sweepLeftTempDirs(): number {
  let removed = 0;
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(OWNED.exec(name)?.[1]);
    if (!pid || pid === process.pid || alive(pid)) continue;
    rmSync(join(tmpdir(), name), { recursive: true, force: true });
    removed++;
  }
  return removed;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // another user's process: alive, and its files not ours to take
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
