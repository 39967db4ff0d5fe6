import { VADEventType, VADStream, type VAD, type VADEvent } from '@livekit/agents';
import { AudioFrame, AudioResampler, AudioResamplerQuality } from '@livekit/rtc-node';
import local from '@livekit/local-inference';
import { behindRealTime } from './behind-real-time.js';

/**
 * The VAD's settings, LiveKit 1.9's `inference.VAD` defaults (durations in ms). Every voice session of the
 * process hears with them, on either transport.
 */
export const VAD_OPTIONS = {
  minSpeechDuration: 50,
  // LiveKit's: 250 ms, so the end-of-turn model's silence window is met out of the box
  minSilenceDuration: 250,
  prefixPaddingDuration: 500,
  maxBufferedSpeech: 60_000,
  activationThreshold: 0.5,
  deactivationThreshold: 0.35,
} as const;

/** The model hears 16 kHz audio, a window of `VAD_WINDOW_SAMPLES` (32 ms) at a time. */
const MODEL_RATE = 16_000;
const WINDOW = local.VAD_WINDOW_SAMPLES;
const WINDOW_MS = (WINDOW / MODEL_RATE) * 1000;
/** A window whose inference takes this long is logged, as LiveKit's VAD does. */
const SLOW_WINDOW_MS = 200;
/** LiveKit reports the VAD's metrics after this many speech starts (one second of its update interval). */
const METRICS_EVERY = Math.ceil(1000 / WINDOW_MS);

/** Audio at `rate` to the model's rate, as LiveKit's VAD resamples it (none at the model's own). */
const resamplerFor = (rate: number): AudioResampler | undefined =>
  rate === MODEL_RATE ? undefined : new AudioResampler(rate, MODEL_RATE, 1, AudioResamplerQuality.QUICK);

/**
 * Samples waiting to be heard. A view handed out stays valid: the samples before `end` are never written
 * again (growing copies the rest to a new buffer, and the old one is left as it is).
 */
class SampleQueue {
  private buffer = new Int16Array(4096);
  private start = 0;
  private end = 0;

  get length(): number {
    return this.end - this.start;
  }

  append(samples: Int16Array): void {
    if (this.end + samples.length > this.buffer.length) {
      const kept = this.buffer.subarray(this.start, this.end);
      const next = new Int16Array(Math.max(this.buffer.length, 2 * (kept.length + samples.length)));
      next.set(kept);
      this.buffer = next;
      this.start = 0;
      this.end = kept.length;
    }
    this.buffer.set(samples, this.end);
    this.end += samples.length;
  }

  /** The first `n` samples (fewer if fewer wait). */
  view(n: number): Int16Array {
    return this.buffer.subarray(this.start, this.start + Math.min(n, this.length));
  }

  drop(n: number): void {
    this.start = Math.min(this.end, this.start + n);
  }

  /** Forgets what waits (what was handed out stays as it is). */
  clear(): void {
    this.start = this.end;
  }
}

/**
 * LiveKit's VAD on the native silero model (`@livekit/local-inference`, the model `inference.VAD` runs),
 * without the web streams LiveKit's own stream puts around it. It hears the session's audio with one reader
 * and hands its events straight to the one reading them. LiveKit's `InferenceVADStream` pumps every frame
 * through three streams in and every 32 ms window's event through three out (a copy of the stream for its
 * metrics): at 50 sessions that was ~half of the VAD's cost on the event loop (bench/voice.mjs, docs/performance.md).
 *
 * What it says is LiveKit's: the same settings (`VAD_OPTIONS`), the same windows and thresholds, the same
 * events in the same order with the same fields, the speech kept from `prefixPaddingDuration` before its start
 * up to `maxBufferedSpeech`, and `flush` a hard boundary (nothing heard before it counts after).
 */
export class NativeVadStream extends VADStream {
  private readonly model = local.createVad();
  private reader: ReadableStreamDefaultReader<AudioFrame> | undefined;
  /** Frames, flushes and the reader's frames, one after another. */
  private chain: Promise<void> = Promise.resolve();
  private readonly events: VADEvent[] = [];
  /** Readers waiting for the next event, in the order they asked. */
  private readonly waiting: ((result: IteratorResult<VADEvent>) => void)[] = [];
  private ended = false;
  /** The model failed: nothing more is heard (LiveKit's stream stops so too). */
  private failed = false;
  private lastInferenceAt = performance.now();

  private rate = 0;
  private resampler: AudioResampler | undefined;
  private readonly atInputRate = new SampleQueue();
  private readonly atModelRate = new SampleQueue();
  private speech: Int16Array | undefined;
  private speechAt = 0;
  private speechFull = false;
  private paddingSamples = 0;
  private inputFraction = 0;
  private extraInferenceMs = 0;
  private speaking = false;
  private speechMs = 0;
  private silenceMs = 0;
  private rawSpeechMs = 0;
  private rawSilenceMs = 0;
  private samplesIndex = 0;
  private timestamp = 0;
  private speechStarts = 0;
  private inferenceMsTotal = 0;

  /** `onSegment` sees each start and end of speech as it is sent. */
  constructor(
    vad: VAD,
    private readonly onSegment?: (event: VADEvent) => void,
    private readonly opts: typeof VAD_OPTIONS = VAD_OPTIONS,
  ) {
    super(vad);
  }

  override updateInputStream(audio: ReadableStream<AudioFrame>): void {
    this.detachInputStream();
    const reader = audio.getReader();
    this.reader = reader;
    void this.read(reader);
  }

  override detachInputStream(): void {
    const reader = this.reader;
    this.reader = undefined;
    // a read under way rejects, and `read` stops
    reader?.releaseLock();
  }

  /**
   * Takes each frame as it comes, into the queue of steps (as LiveKit's pump moves frames into its input queue
   * as they come), so a `flush` lands after every frame read before it. After a failure the frames are still
   * read, and dropped: the audio recognition's copy of them must not pile up.
   */
  private async read(reader: ReadableStreamDefaultReader<AudioFrame>): Promise<void> {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || this.closed || this.reader !== reader) return;
        const arrivedAt = performance.now();
        if (!this.failed) void this.then(() => this.hear(value, arrivedAt));
      }
    } catch {
      // the reader was released: detached, or the stream closed
    }
  }

  override pushFrame(frame: AudioFrame): void {
    this.checkOpen();
    const arrivedAt = performance.now();
    void this.then(() => this.hear(frame, arrivedAt));
  }

  /** A hard boundary: what was heard before it starts no speech after it. */
  override flush(): void {
    this.checkOpen();
    void this.then(() => this.reset());
  }

  override endInput(): void {
    this.checkOpen();
    this.inputClosed = true;
    this.detachInputStream();
    void this.then(() => this.end(), { evenAfterFailure: true });
  }

  private checkOpen(): void {
    if (this.inputClosed) throw new Error('Input is closed');
    if (this.closed) throw new Error('Stream is closed');
  }

  /**
   * Runs `step` after every step before it, none once the stream is closed. A step that fails ends the
   * hearing, logged once; only the end of input still runs after that.
   */
  private then(step: () => void | Promise<void>, opts?: { evenAfterFailure: boolean }): Promise<void> {
    this.chain = this.chain
      .then(() => (this.closed || (this.failed && !opts?.evenAfterFailure) ? undefined : step()))
      .catch((err: unknown) => {
        this.failed = true;
        if (!this.closed) this.logger.error({ err }, 'VAD stream failed');
      });
    return this.chain;
  }

  override next(): Promise<IteratorResult<VADEvent>> {
    const event = this.events.shift();
    if (event) return Promise.resolve({ done: false, value: event });
    if (this.ended) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  protected override sendVADEvent(event: VADEvent): boolean {
    if (this.closed || this.ended) return false;
    if (event.type !== VADEventType.INFERENCE_DONE && this.onSegment) {
      // a follower's trouble is its own: the session keeps its VAD
      try {
        this.onSegment(event);
      } catch (err) {
        this.logger.error({ err }, 'VAD segment not passed on');
      }
    }
    const waiting = this.waiting.shift();
    if (waiting) waiting({ done: false, value: event });
    else this.events.push(event);
    return true;
  }

  private end(): void {
    this.ended = true;
    for (const waiting of this.waiting.splice(0)) waiting({ done: true, value: undefined });
  }

  override close(): void {
    if (this.closed) return;
    this.detachInputStream();
    this.resampler?.close();
    this.resampler = undefined;
    this.end();
    this.events.length = 0;
    behindRealTime.forget(this);
    super.close();
  }

  private async hear(frame: AudioFrame, arrivedAt: number): Promise<void> {
    if (this.closed) return;
    if (this.rate === 0) this.begin(frame.sampleRate);
    else if (frame.sampleRate !== this.rate) {
      this.logger.error('a frame with a different sample rate was already pushed');
      return;
    }
    this.atInputRate.append(frame.data);
    if (this.resampler) for (const f of this.resampler.push(frame)) this.atModelRate.append(f.data);
    const model = this.resampler ? this.atModelRate : this.atInputRate;
    while (model.length >= WINDOW && !this.closed) await this.window(model);
    // how long ago the frame just heard arrived: how far this session's hearing is behind real time
    if (!this.closed) behindRealTime.report(this, performance.now() - arrivedAt);
  }

  private begin(rate: number): void {
    this.rate = rate;
    this.paddingSamples = Math.trunc((this.opts.prefixPaddingDuration * rate) / 1000);
    this.speech = new Int16Array(
      Math.trunc((this.opts.maxBufferedSpeech * rate) / 1000) + this.paddingSamples,
    );
    this.resampler = resamplerFor(rate);
  }

  /** One window through the model, and what it means for the speech so far. */
  private async window(model: SampleQueue): Promise<void> {
    const startedAt = performance.now();
    const probability = await this.model.predict(model.view(WINDOW));
    if (this.closed) return;
    this.samplesIndex += WINDOW;
    this.timestamp += WINDOW_MS;

    // the same stretch at the input's rate, its fraction of a sample carried to the next window
    const exact = (WINDOW * this.rate) / MODEL_RATE + this.inputFraction;
    const heardSamples = Math.trunc(exact);
    this.inputFraction = exact - heardSamples;
    const heard = this.atInputRate.view(heardSamples);
    this.keepSpeech(heard);

    this.lastInferenceAt = performance.now();
    const inferenceDuration = this.lastInferenceAt - startedAt;
    // LiveKit's metrics sum each window's duration rounded
    this.inferenceMsTotal += Math.round(inferenceDuration);
    this.extraInferenceMs = Math.max(0, this.extraInferenceMs + inferenceDuration - WINDOW_MS);
    if (inferenceDuration > SLOW_WINDOW_MS) {
      this.logger.warn(
        { code: 'VAD_BEHIND_REAL_TIME', extraInferenceTimeMs: this.extraInferenceMs },
        'VAD inference is slower than realtime',
      );
    }
    if (this.speaking) this.speechMs += WINDOW_MS;
    else this.silenceMs += WINDOW_MS;
    this.sendVADEvent({
      type: VADEventType.INFERENCE_DONE,
      samplesIndex: this.samplesIndex,
      timestamp: this.timestamp,
      silenceDuration: this.silenceMs,
      speechDuration: this.speechMs,
      probability,
      inferenceDuration,
      frames: [new AudioFrame(heard, this.rate, 1, heard.length)],
      speaking: this.speaking,
      rawAccumulatedSilence: this.rawSilenceMs,
      rawAccumulatedSpeech: this.rawSpeechMs,
    });

    const { activationThreshold, deactivationThreshold } = this.opts;
    if (probability >= activationThreshold || (this.speaking && probability > deactivationThreshold)) {
      this.rawSpeechMs += WINDOW_MS;
      this.rawSilenceMs = 0;
      if (!this.speaking && this.rawSpeechMs >= this.opts.minSpeechDuration) {
        this.speaking = true;
        this.silenceMs = 0;
        this.speechMs = this.rawSpeechMs;
        this.segmentEvent(VADEventType.START_OF_SPEECH, probability, inferenceDuration, this.speechMs);
        this.countSpeechStart();
      }
    } else {
      this.rawSilenceMs += WINDOW_MS;
      this.rawSpeechMs = 0;
      if (!this.speaking) this.keepOnlyPadding();
      else if (this.rawSilenceMs >= this.opts.minSilenceDuration) {
        this.speaking = false;
        this.silenceMs = this.rawSilenceMs;
        this.segmentEvent(
          VADEventType.END_OF_SPEECH,
          probability,
          inferenceDuration,
          Math.max(0, this.speechMs - this.rawSilenceMs),
        );
        this.speechMs = 0;
        this.keepOnlyPadding();
      }
    }

    this.atInputRate.drop(heardSamples);
    if (model !== this.atInputRate) model.drop(WINDOW);
  }

  /** A start or end of speech, with the speech so far (a view of the buffer, as LiveKit's is). */
  private segmentEvent(
    type: VADEventType.START_OF_SPEECH | VADEventType.END_OF_SPEECH,
    probability: number,
    inferenceDuration: number,
    speechDuration: number,
  ): void {
    const speech = this.speech!.subarray(0, this.speechAt);
    this.sendVADEvent({
      type,
      samplesIndex: this.samplesIndex,
      timestamp: this.timestamp,
      silenceDuration: this.silenceMs,
      speechDuration,
      probability,
      inferenceDuration,
      frames: [new AudioFrame(speech, this.rate, 1, speech.length)],
      speaking: type === VADEventType.START_OF_SPEECH,
      rawAccumulatedSilence: 0,
      rawAccumulatedSpeech: 0,
    });
  }

  private keepSpeech(heard: Int16Array): void {
    const speech = this.speech!;
    const n = Math.min(heard.length, speech.length - this.speechAt);
    if (n > 0) {
      speech.set(heard.subarray(0, n), this.speechAt);
      this.speechAt += n;
    } else if (!this.speechFull) {
      this.speechFull = true;
      this.logger.warn(
        { code: 'VAD_SPEECH_CUT', maxBufferedSpeechMs: this.opts.maxBufferedSpeech },
        'maxBufferedSpeech reached, ignoring further data for the current speech input',
      );
    }
  }

  /** Outside speech only its padding is kept: the last `prefixPaddingDuration` heard. */
  private keepOnlyPadding(): void {
    const speech = this.speech;
    if (!speech || this.speechAt <= this.paddingSamples) return;
    speech.copyWithin(0, this.speechAt - this.paddingSamples, this.speechAt);
    this.speechAt = this.paddingSamples;
    this.speechFull = false;
  }

  /** LiveKit's VAD metrics, at its cadence. */
  private countSpeechStart(): void {
    if (++this.speechStarts < METRICS_EVERY) return;
    this.vad.emit('metrics_collected', {
      type: 'vad_metrics',
      timestamp: Date.now(),
      idleTimeMs: Math.trunc(performance.now() - this.lastInferenceAt),
      inferenceDurationTotalMs: this.inferenceMsTotal,
      inferenceCount: this.speechStarts,
      label: this.vad.label,
    });
    this.speechStarts = 0;
    this.inferenceMsTotal = 0;
  }

  /** `flush`: everything heard so far is forgotten, the model's state too. */
  private reset(): void {
    this.model.reset();
    this.atInputRate.clear();
    this.atModelRate.clear();
    this.speech?.fill(0);
    this.speechAt = 0;
    this.speechFull = false;
    this.inputFraction = 0;
    this.extraInferenceMs = 0;
    this.speaking = false;
    this.speechMs = this.silenceMs = this.rawSpeechMs = this.rawSilenceMs = 0;
    this.samplesIndex = this.timestamp = 0;
    if (this.rate !== 0) {
      this.resampler?.close();
      this.resampler = resamplerFor(this.rate);
    }
  }
}
