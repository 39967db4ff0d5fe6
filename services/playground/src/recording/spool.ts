import { mkdir, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { safeError, type Logger } from '@vab/bus';

/** Where recordings are written before they are stored: one directory per process, emptied as they go. */
const SPOOL_PREFIX = 'vab-recordings-';
const SPOOL = join(tmpdir(), `${SPOOL_PREFIX}${process.pid}`);

/**
 * The file a session's recording is written to while it waits to be stored. A call's audio is the caller's:
 * only this process's user may read it.
 */
export async function spoolFile(sessionId: string): Promise<string> {
  await mkdir(SPOOL, { recursive: true, mode: 0o700 });
  return join(SPOOL, `${sessionId}.ogg`);
}

/**
 * Removes what killed processes left in their spools (a recording is spooled only while its session ends, so
 * a directory whose process is gone holds nothing that will ever be stored).
 */
export async function sweepSpools(log: Logger): Promise<void> {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  const names = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const name of names) {
    const pid = Number(name.slice(SPOOL_PREFIX.length));
    if (!name.startsWith(SPOOL_PREFIX) || !Number.isInteger(pid) || pid === process.pid || alive(pid))
      continue;
    await rm(join(tmpdir(), name), { recursive: true, force: true }).catch((err: unknown) =>
      log.debug({ err: safeError(err) }, 'recording spool not removed'),
    );
  }
}
