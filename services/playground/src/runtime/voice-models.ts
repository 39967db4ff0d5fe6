import { inference, type voice } from '@livekit/agents';
import local from '@livekit/local-inference';
import type { TurnSettings } from '@vab/flow';
import { performance } from 'node:perf_hooks';

/**
 * The models every voice session of this process shares, loaded once: the VAD (silero, weights compiled
 * into `@livekit/local-inference`, one LSTM state per stream) and LiveKit's end-of-turn model
 * (`turn-detector-v1-mini`, ~108 MB, one singleton in the native module).
 */
let vad: inference.VAD | undefined;

/** The process's VAD: one instance, a stream of its own per session. */
export function sharedVad(): inference.VAD {
  if (!vad) {
    vad = new inference.VAD();
    // each live session's activity listens to it once (and stops at its close): no limit is a leak here
    vad.setMaxListeners(0);
  }
  return vad;
}

/** Loads both models now (at start), so the first session does not pay ~650 ms for the end-of-turn one. */
export function prewarmVoiceModels(): void {
  local.initVad();
  local.initEot();
  sharedVad();
}

/** The method name LiveKit's local transport asks the executor for (`inference/eot/runner.js`). */
const EOT_METHOD = 'lk_eot_audio';

/**
 * LiveKit's end-of-turn model runs through an inference executor that only a worker's job context provides;
 * without one it "defaults predictions to 1.0" (every pause ends the turn). This executor answers the same
 * request as LiveKit's own `EotRunner` does in its inference process, in ours: the native `predict` runs on
 * libuv's thread pool, so the event loop stays free during the ~10 ms inference.
 */
export const localEotExecutor = {
  async doInference(method: string, data: unknown): Promise<unknown> {
    if (method !== EOT_METHOD) throw new Error(`no local inference for ${method}`);
    const bytes = Buffer.from((data as { pcm: string }).pcm, 'base64');
    const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 2));
    const t0 = performance.now();
    const probability = await local.predict(pcm);
    return { probability, inferenceDurationMs: performance.now() - t0 };
  },
};

type TurnHandling = voice.AgentOptions<unknown>['turnHandling'];

/**
 * LiveKit's turn handling from the agent node's settings: the end-of-turn model actually running (a detector
 * per session, the model shared), endpointing delays, VAD interruptions with their minimum duration and
 * words, false-interruption resume, preemptive generation.
 */
export function turnHandlingOf(t: TurnSettings): NonNullable<TurnHandling> {
  return {
    turnDetection:
      t.turnDetection === 'model'
        ? new inference.TurnDetector({ version: 'v1-mini', executor: localEotExecutor })
        : t.turnDetection,
    endpointing: { mode: 'fixed', minDelay: t.minEndpointingDelay, maxDelay: t.maxEndpointingDelay },
    interruption: {
      enabled: t.allowInterruptions,
      // adaptive interruption is LiveKit Cloud's; the VAD's runs here
      mode: 'vad',
      minDuration: t.minInterruptionDuration,
      minWords: t.minInterruptionWords,
      falseInterruptionTimeout: t.falseInterruptionTimeout,
      resumeFalseInterruption: t.resumeFalseInterruption,
    },
    preemptiveGeneration: { enabled: t.preemptiveGeneration },
  };
}
