// A command run in a process group of its own, so that a stop reaches all of it: vitest exits about a
// millisecond after a SIGTERM without waiting for its workers, which (with the servers their tests started)
// went on for seconds, orphaned. Used by `npm test` (scripts/test.mjs, scripts/test-cluster.mjs).
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

const groups = new Set();

/** Passes `signal` on to every group started here (vitest is then told once, as by a terminal's Ctrl-C). */
export function signalGroups(signal) {
  for (const pid of groups) {
    try {
      process.kill(-pid, signal);
    } catch {
      // gone already
    }
  }
}

const alive = (pid) => {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Runs `command` in a group of its own to its end, then stops what it left of its group (SIGTERM, SIGKILL
 * after 5 s): its exit code, or 1 when a signal ended it.
 */
export async function runGroup(command, argv, options) {
  const child = spawn(command, argv, { ...options, detached: true });
  const code = await new Promise((resolve) => {
    child.on('error', (error) => {
      console.error(`${command} did not start: ${error.message}`);
      resolve(1);
    });
    child.on('exit', (exitCode) => resolve(exitCode ?? 1));
    if (child.pid !== undefined) groups.add(child.pid);
  });
  const pid = child.pid;
  if (pid !== undefined && alive(pid)) {
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // gone meanwhile
    }
    for (let waited = 0; alive(pid) && waited < 5000; waited += 100) await sleep(100);
    if (alive(pid)) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  }
  if (pid !== undefined) groups.delete(pid);
  return code;
}
