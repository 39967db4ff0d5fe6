import { safeError } from '@vab/bus';
import type { Logger } from 'pino';

/** Ends the process as a signal would (the shutdown runs, within its bound), then exits non-zero. */
export type Fail = (reason: string, err: unknown) => void;

/**
 * How a stop treats the work in hand. `drain` (SIGTERM, SIGINT: an orchestrator's or an operator's stop):
 * stop taking work and let what is in flight finish within the bound. `now` (the supervisor of `npm start`
 * that started the process stopped or died): end it at once — a playground's sessions end first, closing
 * their records and keeping their recordings, so nothing waits for a turn's model or a caller.
 */
export type StopMode = 'drain' | 'now';

export interface ServiceOptions {
  /**
   * The process was started by a supervisor that keeps an IPC channel open to it (`npm start`): when the
   * channel closes — the supervisor stopping it, or the supervisor gone, even by SIGKILL — the process stops
   * `now` rather than living on as an orphan that holds its ports.
   */
  supervised?: boolean | undefined;
  /**
   * What stops the service instead of the process's signals: a worker thread receives none (they reach the
   * main thread only), so its host (the process's main thread) asks it to stop. Given the stop, once.
   */
  stopOn?: ((stop: (reason: string, mode: StopMode) => void) => void) | undefined;
}

/** How long an exit waits for the logger's writes in flight (a write to a reader gone fails within it). */
const EXIT_WRITES_MS = 100;

/**
 * Exits once the log's writes in flight have ended. pino writes stdout asynchronously and, at exit, writes
 * what is still queued synchronously; sonic-boom 4 retries that write forever when it fails with anything but
 * EAGAIN: a reader gone (EPIPE: its supervisor or benchmark exited first) kept a shut-down service alive,
 * its main thread in flushSync's sleep loop, holding its ports (found 30 minutes on; in `flushSync` ←
 * `autoEnd` ← process 'exit'). Let the write in flight end first: it succeeds, or fails and pino drops the
 * stream, and nothing is left for the exit's own flush to loop on.
 */
function exitAfterWrites(code: number): void {
  setTimeout(() => process.exit(code), EXIT_WRITES_MS);
}

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
  start: (fail: Fail) => Promise<(mode: StopMode) => Promise<void>>,
  options: ServiceOptions = {},
): void {
  let stopping = false;
  const stop = (signal: string, exitCode: number, mode: StopMode = 'drain') => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, mode }, 'shutting down');
    const force = setTimeout(() => {
      log.error({ boundMs }, 'shutdown exceeded its bound; exiting');
      process.exit(1);
    }, boundMs);
    force.unref();
    // signals arrive from the event loop, so `started` below is always set by then
    started
      .then((shutdown) => shutdown(mode))
      .then(
        () => {
          log.info('shutdown complete');
          exitAfterWrites(exitCode);
        },
        (err: unknown) => {
          log.error({ err: safeError(err) }, 'shutdown failed');
          exitAfterWrites(1);
        },
      );
  };
  if (options.stopOn) options.stopOn((reason, mode) => stop(reason, 0, mode));
  else {
    process.once('SIGTERM', () => stop('SIGTERM', 0));
    process.once('SIGINT', () => stop('SIGINT', 0));
  }
  if (options.supervised) {
    // the listener keeps the channel referenced: the process lives as long as the supervisor holds it (a
    // channel closed before this line ran, while the process was loading, is seen below)
    process.once('disconnect', () => stop('supervisor channel closed', 0, 'now'));
    if (!process.connected) setImmediate(() => stop('supervisor channel closed', 0, 'now'));
  }
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
