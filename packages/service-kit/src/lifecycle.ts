import { safeError } from '@vab/bus';
import type { Logger } from 'pino';

/** Ends the process as a signal would (the shutdown runs, within its bound), then exits non-zero. */
export type Fail = (reason: string, err: unknown) => void;

/**
 * Owns a service process's lifecycle. The SIGTERM/SIGINT handler is installed before anything starts, so a
 * signal during startup waits for it and then shuts down instead of killing the process mid-way. `start`
 * returns the shutdown to run; if it has not finished within `boundMs` the process exits anyway, so an
 * orchestrator never has to SIGKILL us. `start` gets `fail`, for a process that can no longer do its work
 * (it stopped serving a subject): it shuts down the same way and exits 1, so the orchestrator restarts it.
 * Every error is logged one way, `{ err: safeError(err) }`: type, message and stack.
 */
export function runService(
  log: Logger,
  boundMs: number,
  start: (fail: Fail) => Promise<() => Promise<void>>,
): void {
  let stopping = false;
  const stop = (signal: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error({ boundMs }, 'shutdown exceeded its bound; exiting');
      process.exit(1);
    }, boundMs);
    force.unref();
    // signals arrive from the event loop, so `started` below is always set by then
    started
      .then((shutdown) => shutdown())
      .then(
        () => {
          log.info('shutdown complete');
          process.exit(exitCode);
        },
        (err: unknown) => {
          log.error({ err: safeError(err) }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.once('SIGTERM', () => stop('SIGTERM', 0));
  process.once('SIGINT', () => stop('SIGINT', 0));
  const fail: Fail = (reason, err) => {
    log.fatal({ reason, err: safeError(err) }, 'cannot go on');
    stop(reason, 1);
  };
  const started = start(fail);
  started.catch((err: unknown) => {
    log.fatal({ err: safeError(err) }, 'failed to start');
    process.exit(1);
  });
}
