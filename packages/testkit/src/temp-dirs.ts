import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
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
 * Removes every directory of this process's (at its exit, or on the signal that ends it). Best effort: what a
 * server still writes after its stop's bound is the next sweep's, and no failure here stops an exit.
 */
export function removeOwnTempDirs(): void {
  for (const dir of own) removeQuietly(dir);
  own.clear();
}

/**
 * Removes the directories in `parent` whose process is gone (its pid no longer runs), this user's only.
 * Returns how many. Never throws: one it cannot remove now (its servers still stopping) is left for a later.
 */
export function sweepLeftTempDirs(parent = tmpdir()): number {
  let removed = 0;
  for (const name of readdirSync(parent)) {
    const pid = Number(OWNED.exec(name)?.[1]);
    if (!pid || pid === process.pid || alive(pid)) continue;
    const dir = join(parent, name);
    try {
      if (statSync(dir).uid !== process.getuid?.()) continue;
      rmSync(dir, { recursive: true, force: true });
      removed++;
    } catch {
      // gone meanwhile, or not removable now
    }
  }
  return removed;
}

function removeQuietly(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    // left for the next sweep
  }
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
