import type { Logger } from 'pino';

/**
 * Runs `shutdown` once on SIGTERM/SIGINT and exits; if it has not finished within `boundMs` the process
 * exits anyway, so an orchestrator never has to SIGKILL us.
 */
export function onShutdownSignal(log: Logger, boundMs: number, shutdown: () => Promise<void>): void {
  let started = false;
  const run = (signal: string) => {
    if (started) return;
    started = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error({ boundMs }, 'shutdown exceeded its bound; exiting');
      process.exit(1);
    }, boundMs);
    force.unref();
    shutdown().then(
      () => {
        log.info('shutdown complete');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => run('SIGTERM'));
  process.once('SIGINT', () => run('SIGINT'));
}
