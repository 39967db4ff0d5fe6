import type { Logger } from 'pino';

/**
 * Owns a service process's lifecycle. The SIGTERM/SIGINT handler is installed before anything starts, so a
 * signal during startup waits for it and then shuts down instead of killing the process mid-way. `start`
 * returns the shutdown to run; if it has not finished within `boundMs` the process exits anyway, so an
 * orchestrator never has to SIGKILL us.
 */
export function runService(log: Logger, boundMs: number, start: () => Promise<() => Promise<void>>): void {
  let stopping = false;
  const stop = (signal: string) => {
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
          process.exit(0);
        },
        (err: unknown) => {
          log.error({ err: err instanceof Error ? err.message : String(err) }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  const started = start();
  started.catch((err: unknown) => {
    log.fatal({ err: err instanceof Error ? err.message : String(err) }, 'failed to start');
    process.exit(1);
  });
}
