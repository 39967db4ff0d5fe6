import type { Logger } from 'pino';

/**
 * @livekit/agents 1.9 starts a TTS request's main task as a promise nobody awaits
 * (`ChunkedStream`/`SynthesizeStream` in `dist/tts/tts.js`, likewise its STT streams): when the provider
 * fails, the error reaches the session as an `error` event (which we report) and *also* becomes an unhandled
 * rejection. LiveKit's own worker runs each job in a child process, where that costs one call; the
 * playground hosts every session in one process, where Node's default would end them all. These, and only
 * these, are logged and survived.
 */
const LIVEKIT_MODEL_TASK = /[\\/]@livekit[\\/]agents[\\/]dist[\\/](tts|stt)[\\/]/;

export const isLiveKitStrayRejection = (reason: unknown): boolean => {
  // an Error, or its serialized form (a test runner's)
  const stack = (reason as { stack?: unknown } | null)?.stack;
  return typeof stack === 'string' && LIVEKIT_MODEL_TASK.test(stack);
};

/** The process keeps running through LiveKit's stray rejections; any other still ends it, as Node's default. */
export function surviveLiveKitRejections(log: Logger): void {
  process.on('unhandledRejection', (reason) => {
    if (isLiveKitStrayRejection(reason)) {
      log.warn(
        { code: 'LIVEKIT_STRAY_REJECTION', errorName: (reason as Error).name },
        'a model request failed after its error was reported; the process carries on',
      );
      return;
    }
    log.fatal({ err: reason instanceof Error ? reason : String(reason) }, 'unhandled rejection');
    process.exit(1);
  });
}
