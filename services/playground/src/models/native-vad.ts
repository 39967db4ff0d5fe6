import { VADEventType, VADStream, type VAD, type VADEvent } from '@livekit/agents';
import { AudioFrame, AudioResampler, AudioResamplerQuality } from '@livekit/rtc-node';
import local from '@livekit/local-inference';
import { nativeInference } from './native-inference.js';
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

/**
 * Where the end of speech is dated (ours, not LiveKit's). The model's probability stays over the deactivation
 * threshold for a few windows after the voice stops (its memory of the speech: ~120 ms past the sound on a
 * Festival voice at 8 kHz, bench/phone-greeting.mjs), and LiveKit dates the end at the last window over it, so
 * every wait counted from there (`minEndpointingDelay`, `responseMs`) started that late. The model still
 * decides that the speech ended; the end is dated where its sound did: the end of the last 10 ms of the speech
 * within `SOUND_BELOW_PEAK_DB` of its loudest 10 ms and above `SOUND_FLOOR`. On a noisy line the noise keeps
 * its 10 ms blocks "loud" and the dating stays the model's: never later than LiveKit's, at most
 * `SOUND_MAX_BACKDATE_MS` earlier (a caller who trails off far quieter is not cut).
 */
const SOUND_BLOCK_MS = 10;
/** −30 dB: a fricative or a falling last syllable still counts, the model's lingering silence does not. */
const SOUND_BELOW_PEAK_DB = 30;
/** −50 dBFS (RMS 104 of 32768): under any speech on a line, over its digital and comfort silence. */
const SOUND_FLOOR = 104;
const SOUND_MAX_BACKDATE_MS = 300;

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
 * up to `maxBufferedSpeech`, and `flush` a hard boundary (nothing heard before it counts after). Except where
 * an END_OF_SPEECH dates the speech's end (its `silenceDuration`, which LiveKit counts the endpointing wait
 * back from, and `speechDuration`): where the sound ended (above, `SOUND_*`), and up to the audio received so
 * far, not the window's end (a frame's samples beyond the last whole window have been heard already: up to
 * 32 ms of the line that LiveKit's dating counted as not yet waited).
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

  /** The sound's dating, in samples at the input's rate since the stream's start (or flush): see `SOUND_*`. */
  private inputIndex = 0;
  private blockSamples = 0;
  private blockPower = 0;
  private blockFilled = 0;
  /** The loudest 10 ms (mean square) of the speech under way, and the end of its last loud 10 ms. */
  private peakPower = 0;
  private loudUntil = 0;
  /** Where this speech's first window over the threshold began and its last one ended. */
  private speechFrom = 0;
  private speechUntil = 0;
  private endedAt: number | undefined;
  /** When the last frame appended to the queue arrived (`performance.now()`). */
  private lastArrivedAt = 0;

  /**
   * `onSegment` sees each start and end of speech as it is sent. `soundDating` false dates the end of speech
   * as LiveKit's does (at the last window over the threshold): its events are then LiveKit's exactly.
   */
  constructor(
    vad: VAD,
    private readonly onSegment?: (event: VADEvent) => void,
    private readonly opts: typeof VAD_OPTIONS = VAD_OPTIONS,
    private readonly soundDating = true,
  ) {
    super(vad);
  }

  /** Where the last end of speech was dated, in ms of the audio since the stream's start (or flush). */
  get lastSpeechEndMs(): number | undefined {
    return this.endedAt;
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
    this.lastArrivedAt = arrivedAt;
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
    this.blockSamples = Math.max(1, Math.round((rate * SOUND_BLOCK_MS) / 1000));
  }

  /**
   * How loud `heard` (this window, at the input's rate) was, per 10 ms: the peak counts only windows the model
   * calls speech (a click before it raises no bar), any loud 10 ms moves the sound's end.
   */
  private measure(heard: Int16Array, speech: boolean): void {
    const block = this.blockSamples;
    const floor = SOUND_FLOOR * SOUND_FLOOR;
    const belowPeak = 10 ** (-SOUND_BELOW_PEAK_DB / 10);
    for (let i = 0; i < heard.length; i++) {
      const v = heard[i]!;
      this.blockPower += v * v;
      if (++this.blockFilled < block) continue;
      const power = this.blockPower / block;
      this.blockPower = 0;
      this.blockFilled = 0;
      if (speech && power > this.peakPower) this.peakPower = power;
      if (power >= floor && power >= this.peakPower * belowPeak) this.loudUntil = this.inputIndex + i + 1;
    }
  }

  /**
   * The end of the speech that just ended, in input samples: where its sound ended, within the backdating
   * bound, or where the model's last window over the threshold did.
   */
  private speechEnd(): number {
    const byModel = this.speechUntil;
    if (!this.soundDating || this.loudUntil <= this.speechFrom || this.loudUntil >= byModel) return byModel;
    const bound = byModel - Math.round((SOUND_MAX_BACKDATE_MS * this.rate) / 1000);
    return Math.max(this.loudUntil, bound);
  }

  /** One window through the model, and what it means for the speech so far. */
  private async window(model: SampleQueue): Promise<void> {
    const startedAt = performance.now();
    const probability = await nativeInference(() => this.model.predict(model.view(WINDOW)));
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
    const { activationThreshold, deactivationThreshold } = this.opts;
    const speechWindow =
      probability >= activationThreshold || (this.speaking && probability > deactivationThreshold);
    this.measure(heard, probability >= activationThreshold);
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

    if (speechWindow) {
      if (!this.speaking && this.rawSpeechMs === 0) this.speechFrom = this.inputIndex;
      this.speechUntil = this.inputIndex + heard.length;
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
      if (!this.speaking) {
        this.keepOnlyPadding();
        this.peakPower = 0;
      } else if (this.rawSilenceMs >= this.opts.minSilenceDuration) {
        this.speaking = false;
        this.silenceMs = this.rawSilenceMs;
        this.endSpeech(probability, inferenceDuration);
        this.speechMs = 0;
        this.peakPower = 0;
        this.keepOnlyPadding();
      }
    }

    this.inputIndex += heard.length;
    this.atInputRate.drop(heardSamples);
    if (model !== this.atInputRate) model.drop(WINDOW);
  }

  /**
   * The END_OF_SPEECH, dated: LiveKit takes `Date.now() - silenceDuration - inferenceDuration` for the end, so
   * the silence runs from the speech's end to the last sample received (this window's end and what waits past
   * it), and on to now from when that sample arrived, less this window's inference (which LiveKit takes off).
   */
  private endSpeech(probability: number, inferenceDuration: number): void {
    if (!this.soundDating) {
      this.endedAt = this.timestamp - this.rawSilenceMs;
      this.segmentEvent(
        VADEventType.END_OF_SPEECH,
        probability,
        inferenceDuration,
        Math.max(0, this.speechMs - this.rawSilenceMs),
      );
      return;
    }
    const ms = (samples: number) => (samples / this.rate) * 1000;
    const end = this.speechEnd();
    // the window's samples are still in the queue: everything received is this window and what follows it
    const received = this.inputIndex + this.atInputRate.length;
    const earlier = ms(this.speechUntil - end);
    const waited = Math.max(0, performance.now() - this.lastArrivedAt - inferenceDuration);
    this.endedAt = ms(end);
    this.segmentEvent(
      VADEventType.END_OF_SPEECH,
      probability,
      inferenceDuration,
      Math.max(0, this.speechMs - this.rawSilenceMs - earlier),
      ms(received - end) + waited,
    );
  }

  /** A start or end of speech, with the speech so far (a view of the buffer, as LiveKit's is). */
  private segmentEvent(
    type: VADEventType.START_OF_SPEECH | VADEventType.END_OF_SPEECH,
    probability: number,
    inferenceDuration: number,
    speechDuration: number,
    silenceDuration = this.silenceMs,
  ): void {
    const speech = this.speech!.subarray(0, this.speechAt);
    this.sendVADEvent({
      type,
      samplesIndex: this.samplesIndex,
      timestamp: this.timestamp,
      silenceDuration,
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
    this.inputIndex = this.blockPower = this.blockFilled = this.peakPower = 0;
    this.loudUntil = this.speechFrom = this.speechUntil = 0;
    this.endedAt = undefined;
    if (this.rate !== 0) {
      this.resampler?.close();
      this.resampler = resamplerFor(this.rate);
    }
  }
}
