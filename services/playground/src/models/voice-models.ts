import { inference, stt, VAD, VADEventType, VADStream, type VADEvent, type voice } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import local from '@livekit/local-inference';
import { nativeInference } from './native-inference.js';
import type { TurnSettings } from '@vab/flow';
import { NativeVadStream, VAD_OPTIONS } from './native-vad.js';
import { performance } from 'node:perf_hooks';

/**
 * The models every voice session of this process shares, loaded once: the VAD (silero, weights compiled
 * into `@livekit/local-inference`, one LSTM state per stream) and LiveKit's end-of-turn model
 * (`turn-detector-v1-mini`, ~108 MB, one singleton in the native module).
 */
let vad: inference.VAD | undefined;

/** The process's VAD (the session's default; each agent of a flow hears through its `SessionVad`). */
export function sharedVad(): inference.VAD {
  if (!vad) {
    vad = new inference.VAD(VAD_OPTIONS);
    // each live session's activity listens to it once (and stops at its close): no limit is a leak here
    vad.setMaxListeners(0);
  }
  return vad;
}

/**
 * One session's VAD: the process's model, one inference stream per session, whatever needs its segments. A
 * batch STT (OpenAI's HTTP transcription) hears in VAD segments too, and LiveKit's `StreamAdapter` would run a
 * second VAD stream over the same audio for it: twice the inference and the per-frame streams (a CPU profile
 * at 20 sessions put the VAD first). Here the adapter gets a follower instead: the segments of the session's
 * own stream, and no second inference. That stream is a `NativeVadStream`: LiveKit's VAD without its streams.
 */
export class SessionVad extends VAD {
  label = 'inference.VAD';
  private readonly followers = new Set<FollowerVadStream>();
  private readonly followerVad: FollowerVad;
  /** Where the speech that last ended was dated, on the wall clock, until taken or the next speech starts. */
  private speechEndedAt: number | undefined;

  constructor() {
    super(sharedVad().capabilities);
    this.followerVad = new FollowerVad(this);
  }

  override get minSilenceDuration(): number {
    return VAD_OPTIONS.minSilenceDuration;
  }

  /** The session's stream (its audio recognition's): the model's own, its segments passed on to followers. */
  override stream(): VADStream {
    return new NativeVadStream(this, (ev) => {
      // LiveKit's own dating of the end (agent_activity's and audio_recognition's), before it reads the event
      if (ev.type === VADEventType.END_OF_SPEECH)
        this.speechEndedAt = Date.now() - ev.silenceDuration - ev.inferenceDuration;
      else this.speechEndedAt = undefined;
      for (const f of this.followers) f.mirror(ev);
    });
  }

  /**
   * Where the speech that just ended ended, on the wall clock, as LiveKit dates it (the endpointing wait
   * counts from it): once, after its END_OF_SPEECH (undefined when none came since the speech started).
   */
  takeSpeechEnd(): number | undefined {
    const at = this.speechEndedAt;
    this.speechEndedAt = undefined;
    return at;
  }

  /** `model` made streaming: a batch one on this session's VAD segments, a streaming one as it is. */
  streaming(model: stt.STT): stt.STT {
    return model.capabilities.streaming ? model : new SegmentAdapter(model, this.followerVad);
  }

  follow(stream: FollowerVadStream): () => void {
    this.followers.add(stream);
    return () => this.followers.delete(stream);
  }
}

/**
 * LiveKit's `StreamAdapter` for a batch STT, without the audio it has no use for. Its stream pumps every frame
 * through a stream and a queue of its own only to push it to its VAD, which, following the session's stream,
 * drops it. Here the frames are read (the audio recognition's copy of them must not pile up) and let go;
 * the transcripts come from the segments as LiveKit's adapter makes them.
 */
class SegmentAdapter extends stt.StreamAdapter {
  constructor(
    private readonly batch: stt.STT,
    private readonly segmentVad: VAD,
  ) {
    super(batch, segmentVad);
  }

  override stream(options?: Parameters<stt.StreamAdapter['stream']>[0]): stt.StreamAdapterWrapper {
    return new SegmentStream(this.batch, this.segmentVad, options?.connOptions);
  }
}

class SegmentStream extends stt.StreamAdapterWrapper {
  private reader: ReadableStreamDefaultReader<AudioFrame> | undefined;

  override updateInputStream(audio: ReadableStream<AudioFrame>): void {
    this.detachInputStream();
    const reader = audio.getReader();
    this.reader = reader;
    void (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        // released: detached or closed
      }
    })();
  }

  override detachInputStream(): void {
    const reader = this.reader;
    this.reader = undefined;
    reader?.releaseLock();
  }

  override close(): void {
    this.detachInputStream();
    super.close();
  }
}

/** What `StreamAdapter` is given: a VAD whose streams follow the session's. */
class FollowerVad extends VAD {
  label = 'inference.VAD (follower)';
  constructor(private readonly session: SessionVad) {
    super(session.capabilities);
  }
  override stream(): VADStream {
    return new FollowerVadStream(this, this.session);
  }
}

/**
 * The session stream's segments, for a batch STT. The frames it is pushed are the ones the session's stream
 * already hears, so they are dropped (nothing queues); an utterance's audio is copied, since the session's
 * stream reuses its buffer for the next one while the transcription is under way.
 */
class FollowerVadStream extends VADStream {
  private readonly unfollow: () => void;
  constructor(vad: VAD, session: SessionVad) {
    super(vad);
    this.unfollow = session.follow(this);
  }
  mirror(ev: VADEvent): void {
    if (this.closed || this.inputClosed) return;
    const frames =
      ev.type === VADEventType.END_OF_SPEECH
        ? ev.frames.map((f) => new AudioFrame(f.data.slice(), f.sampleRate, f.channels, f.samplesPerChannel))
        : ev.frames;
    this.sendVADEvent({ ...ev, frames });
  }
  override pushFrame(): void {
    if (this.inputClosed) throw new Error('Input is closed');
    if (this.closed) throw new Error('Stream is closed');
  }
  override flush(): void {
    this.pushFrame();
  }
  override endInput(): void {
    this.pushFrame();
    this.inputClosed = true;
    this.unfollow();
    // the adapter reads until the stream ends: no more segments come
    this.outputWriter.close().catch(() => undefined);
  }
  override close(): void {
    this.unfollow();
    super.close();
  }
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
    const probability = await nativeInference(() => local.predict(pcm));
    return { probability, inferenceDurationMs: performance.now() - t0 };
  },
};

type TurnHandling = voice.AgentOptions<unknown>['turnHandling'];

/**
 * A phone line's turn settings where the agent node names none (docs/api.md, "Phone-grade turn handling").
 * Why each differs from the web defaults: an 8 kHz line's recognizer finalizes later and callers pause longer
 * between phrases (read a card number, think), so the turn waits a little more before it may end
 * (600 ms, not 500); line noise and the agent's own echo (a speakerphone, no echo cancellation on our side of
 * the PSTN) must not cut the agent, so an interruption needs 700 ms of speech, not 500, and a false one
 * resumes sooner (1.5 s). The VAD keeps its settings: it hears the line resampled to its 16 kHz, where the
 * phone's narrow band lowers no speech probability enough to need other thresholds, and it is shared by the
 * process's sessions.
 */
export const PHONE_TURN_DEFAULTS: Readonly<Partial<TurnSettings>> = {
  minEndpointingDelay: 600,
  maxEndpointingDelay: 3000,
  minInterruptionDuration: 700,
  falseInterruptionTimeout: 1500,
};

/** The agent's turn settings for a phone call: the phone's defaults where the node names none of its own. */
export function phoneTurnSettings<T extends TurnSettings & { turnSet?: readonly (keyof TurnSettings)[] }>(
  agent: T,
): T {
  const named = new Set(agent.turnSet ?? []);
  const out: T = { ...agent };
  for (const [k, v] of Object.entries(PHONE_TURN_DEFAULTS) as [keyof TurnSettings, never][]) {
    if (!named.has(k)) out[k] = v;
  }
  // a named minimum above the phone's maximum keeps the node's rule (max ≥ min)
  if (out.maxEndpointingDelay < out.minEndpointingDelay) out.maxEndpointingDelay = out.minEndpointingDelay;
  return out;
}

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
