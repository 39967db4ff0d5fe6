import { stt as livekitStt, voice, type stt, type tts } from '@livekit/agents';
import { AudioFrame, AudioResampler } from '@livekit/rtc-node';
import type { CallerBehaviour, ModelUsage } from '@vab/contracts';
import { heardPart, isAudible } from '../transports/voice-socket/bus-audio.js';
import type { PlaybackHooks } from '../transports/voice-pipeline.js';
import { CallTimeline, FRAME_MS } from './voice-figures.js';

/** The simulated caller's line rate: what a phone-grade microphone gives the pipeline. */
export const CALLER_RATE = 16000;
const FRAME_SAMPLES = (CALLER_RATE * FRAME_MS) / 1000;

/** mulberry32: a small seeded generator, so an attempt's behaviours and noise repeat with its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One segment of the agent's audio (a reply, up to its flush or interruption) as it plays. */
interface Segment {
  startedAt?: number;
  playedSamples: number;
  queuedSamples: number;
  flushed: boolean;
  audible: boolean;
}

/**
 * The agent's audio played to the simulated caller as a phone plays it: in real time, one frame per tick of
 * the caller's clock, with LiveKit's playout handshake done at play time — a segment's playback starts with its
 * first frame played and finishes when its last flushed frame has played; an interruption (`clearBuffer`) drops
 * what was not played and reports what was. A segment captured while the one before still plays queues behind
 * it, each reported on its own. Pauses when LiveKit pauses it (false-interruption resume).
 */
export class CallerPlayback extends voice.AudioOutput {
  private queue: { data: Int16Array; seg: Segment }[] = [];
  private head = 0;
  /** Segments not finished yet, oldest first; the last one takes the frames being captured. */
  private segments: Segment[] = [];
  private resampler: AudioResampler | undefined;
  private paused = false;

  constructor(private readonly hooks: PlaybackHooks) {
    super(CALLER_RATE, undefined, { pause: true });
  }

  override async captureFrame(frame: AudioFrame): Promise<void> {
    await super.captureFrame(frame);
    let seg = this.segments.at(-1);
    if (!seg || seg.flushed) {
      seg = { playedSamples: 0, queuedSamples: 0, flushed: false, audible: false };
      this.segments.push(seg);
    }
    for (const f of this.toCallerRate(frame)) this.enqueue(f.data, seg);
  }

  private enqueue(data: Int16Array, seg: Segment): void {
    this.queue.push({ data, seg });
    seg.queuedSamples += data.length;
  }

  private toCallerRate(frame: AudioFrame): AudioFrame[] {
    if (frame.sampleRate === CALLER_RATE) return [frame];
    if (this.resampler?.inputRate !== frame.sampleRate) {
      this.resampler?.close();
      this.resampler = new AudioResampler(frame.sampleRate, CALLER_RATE, 1);
    }
    return this.resampler.push(frame);
  }

  override flush(): void {
    super.flush();
    const seg = this.segments.at(-1);
    if (!seg || seg.flushed) return;
    if (this.resampler) for (const f of this.resampler.flush()) this.enqueue(f.data, seg);
    seg.flushed = true;
    if (seg.queuedSamples <= 0 && seg === this.segments[0]) this.finish(seg, false);
  }

  override clearBuffer(): void {
    this.queue = [];
    this.head = 0;
    // the segment being captured ends here, as a flush would end it (LiveKit counts segments so)
    if (this.segments.at(-1)?.flushed === false) super.flush();
    for (const seg of [...this.segments]) this.finish(seg, true);
  }

  override pause(): void {
    super.pause();
    this.paused = true;
  }

  override resume(): void {
    super.resume();
    this.paused = false;
  }

  /** The next frame the caller hears (silence when nothing plays). */
  play(out: Int16Array): void {
    out.fill(0);
    if (this.paused) return;
    let at = 0;
    while (at < out.length && this.queue.length > 0) {
      const chunk = this.queue[0]!;
      const seg = chunk.seg;
      if (seg.startedAt === undefined) {
        seg.startedAt = Date.now();
        this.onPlaybackStarted(seg.startedAt);
      }
      const n = Math.min(out.length - at, chunk.data.length - this.head);
      const part = out.subarray(at, at + n);
      part.set(chunk.data.subarray(this.head, this.head + n));
      at += n;
      this.head += n;
      seg.playedSamples += n;
      seg.queuedSamples -= n;
      if (!seg.audible && isAudible(part)) {
        seg.audible = true;
        this.hooks.onAudible(Date.now());
      }
      if (this.head >= chunk.data.length) {
        this.queue.shift();
        this.head = 0;
      }
      if (seg.flushed && seg.queuedSamples <= 0) this.finish(seg, false);
    }
  }

  /** Audio captured and not played yet. */
  get pending(): boolean {
    return this.queue.length > 0;
  }

  private finish(seg: Segment, interrupted: boolean): void {
    const i = this.segments.indexOf(seg);
    if (i < 0) return;
    this.segments.splice(i, 1);
    const playedMs = (seg.playedSamples / CALLER_RATE) * 1000;
    const text = interrupted ? this.hooks.replyText() : undefined;
    this.onPlaybackFinished({
      playbackPosition: playedMs / 1000,
      interrupted,
      ...(text !== undefined ? { synchronizedTranscript: heardPart(text, playedMs, undefined) } : {}),
    });
  }

  close(): void {
    for (const seg of [...this.segments]) this.finish(seg, true);
    this.resampler?.close();
    this.resampler = undefined;
  }
}

/** Seeded background noise of one colour, at unit RMS before its gain. */
class Noise {
  private b = [0, 0, 0, 0, 0, 0, 0];
  private brown = 0;
  private spare: number | undefined;
  private readonly scale: number;

  constructor(
    private readonly kind: 'white' | 'pink' | 'brown',
    private readonly random: () => number,
  ) {
    // the colour's own RMS, measured once, so the gain sets the level exactly
    let sum = 0;
    const n = CALLER_RATE;
    for (let i = 0; i < n; i++) sum += this.raw() ** 2;
    this.scale = 1 / Math.sqrt(sum / n);
  }

  private gaussian(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    const u = Math.max(this.random(), 1e-12);
    const v = this.random();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  private raw(): number {
    const w = this.gaussian();
    if (this.kind === 'white') return w;
    if (this.kind === 'brown') {
      this.brown = (this.brown + 0.02 * w) / 1.02;
      return this.brown;
    }
    // Paul Kellet's pink filter
    const b = this.b;
    b[0] = 0.99886 * b[0]! + w * 0.0555179;
    b[1] = 0.99332 * b[1]! + w * 0.0750759;
    b[2] = 0.969 * b[2]! + w * 0.153852;
    b[3] = 0.8665 * b[3]! + w * 0.3104856;
    b[4] = 0.55 * b[4]! + w * 0.5329522;
    b[5] = -0.7616 * b[5]! - w * 0.016898;
    const out = b[0]! + b[1]! + b[2]! + b[3]! + b[4]! + b[5]! + b[6]! + w * 0.5362;
    b[6] = w * 0.115926;
    return out;
  }

  /** Adds noise at `rms` to the frame. */
  mixInto(pcm: Int16Array, rms: number): void {
    const gain = rms * this.scale;
    for (let i = 0; i < pcm.length; i++) {
      const v = pcm[i]! + this.raw() * gain;
      pcm[i] = Math.max(-32768, Math.min(32767, Math.round(v)));
    }
  }
}

const powerOf = (pcm: Int16Array) => {
  let sum = 0;
  for (let i = 0; i < pcm.length; i++) sum += pcm[i]! * pcm[i]!;
  return sum / pcm.length;
};

/** RMS of a line's speech (its audible 20 ms frames only). */
function speechRms(pcm: Int16Array): number {
  let sum = 0;
  let n = 0;
  for (let at = 0; at + FRAME_SAMPLES <= pcm.length; at += FRAME_SAMPLES) {
    const f = pcm.subarray(at, at + FRAME_SAMPLES);
    if (!isAudible(f)) continue;
    sum += powerOf(f);
    n++;
  }
  return n === 0 ? 0 : Math.sqrt(sum / n);
}

/**
 * Where to pause inside a line: the middle of the quiet stretch (a gap between words) nearest to the line's
 * middle; the middle itself when the line has none.
 */
export function pausePoint(pcm: Int16Array): number {
  const win = CALLER_RATE / 100;
  const quiet: boolean[] = [];
  for (let at = 0; at + win <= pcm.length; at += win) quiet.push(!isAudible(pcm.subarray(at, at + win)));
  const first = quiet.indexOf(false);
  const last = quiet.lastIndexOf(false);
  const mid = Math.floor(pcm.length / win / 2);
  let best: number | undefined;
  for (let i = first; i >= 0 && i < last; i++) {
    if (!quiet[i]) continue;
    let j = i;
    while (j < last && quiet[j]) j++;
    // a gap between words: 40 ms or more of quiet
    if (j - i >= 4) {
      const centre = Math.floor((i + j) / 2);
      if (best === undefined || Math.abs(centre - mid) < Math.abs(best - mid)) best = centre;
    }
    i = j;
  }
  return (best ?? mid) * win;
}

/** A typical level of speech (about −24 dBFS): the noise's reference until the caller's own is known. */
const NOMINAL_SPEECH_RMS = 2000;

/** Quiet this long after the agent's speech ends a stretch for an STT that does not stream. */
const EAR_GAP_MS = 400;

/** A line queued to be spoken: its audio (pauses and leading silence included) and where its speech is. */
interface QueuedLine {
  pcm: Int16Array;
  at: number;
  bargeIn: boolean;
  span?: { startFrame: number; endFrame: number };
  done: () => void;
}

export interface CallerVoiceOptions {
  tts: tts.TTS;
  stt: stt.STT;
  ttsId: { provider: string; model: string };
  sttId: { provider: string; model: string };
  behaviour: CallerBehaviour;
  /** The pipeline's input: the caller's audio goes there, one frame per tick. */
  send(pcm: Int16Array): void;
  seed: number;
}

/**
 * The simulated caller's mouth and ear on one real-time clock: every 20 ms it sends the next frame of its
 * speech (or silence), with background noise mixed in, to the agent's pipeline, and plays the next frame of
 * the agent's audio, which it hears through its STT. What both sides did on that clock is the call's
 * timeline, the figures' source.
 */
export class CallerVoice {
  readonly timeline = new CallTimeline();
  playback: CallerPlayback | undefined;
  private readonly random: () => number;
  private readonly noise: Noise | undefined;
  private noiseRms = 0;
  /** The noise's level is set against the caller's own speech (known from its first line). */
  private noiseCalibrated = false;
  private readonly lines: QueuedLine[] = [];
  private timer: NodeJS.Timeout | undefined;
  private t0 = 0;
  private frame = 0;
  private listeners = new Set<() => void>();
  private sttStream: stt.SpeechStream | undefined;
  private heardNow: string[] = [];
  private sttAudioSamples = 0;
  /** The agent's speech being heard by an STT that does not stream, until it ends. */
  private speechFrames: AudioFrame[] = [];
  private pendingRecognitions = 0;
  private ttsCharacters = 0;
  private lastAgentFrame = -1;
  private stopped = false;
  private readonly agentOut = new Int16Array(FRAME_SAMPLES);

  constructor(private readonly opts: CallerVoiceOptions) {
    this.random = seededRandom(opts.seed);
    const noise = opts.behaviour.noise;
    // its own generator: drawing noise never shifts the behaviours' draws
    if (noise) {
      this.noise = new Noise(noise.kind, seededRandom(opts.seed ^ 0x5bd1e995));
      // on the line from the first frame: at a typical speech level until the caller's own is known
      this.noiseRms = NOMINAL_SPEECH_RMS / 10 ** (noise.snrDb / 20);
    }
  }

  /** The pipeline's playback sink: the caller's ear. */
  sink(hooks: PlaybackHooks): CallerPlayback {
    this.playback = new CallerPlayback(hooks);
    return this.playback;
  }

  /**
   * Starts the clock: from now on a frame goes each way every 20 ms. A streaming STT hears the agent's audio
   * as it plays; one that is not (OpenAI's file mode) is given each stretch of the agent's speech once it
   * ends (`recognize`): the caller knows where the agent's speech is, so no second VAD runs per call.
   */
  start(): void {
    const model = this.opts.stt;
    if (model.capabilities.streaming) {
      this.sttStream = model.stream();
      void this.listen(this.sttStream);
    }
    this.t0 = Date.now();
    this.timer = setInterval(() => this.tick(), FRAME_MS / 2);
  }

  /** The draws of one caller turn, always all three, in one order: a seed gives the same call again. */
  drawTurn(): { pause: boolean; silence: boolean; bargeIn: boolean } {
    const b = this.opts.behaviour;
    const [p, s, i] = [this.random(), this.random(), this.random()];
    return {
      pause: b.midSentencePause !== undefined && p < b.midSentencePause.chance,
      silence: b.silenceBeforeAnswer !== undefined && s < b.silenceBeforeAnswer.chance,
      bargeIn: b.bargeIn !== undefined && i < b.bargeIn.chance,
    };
  }

  private async listen(stream: stt.SpeechStream): Promise<void> {
    try {
      for await (const ev of stream) {
        if (ev.type !== livekitStt.SpeechEventType.FINAL_TRANSCRIPT) continue;
        const text = ev.alternatives?.[0]?.text.trim();
        if (text) this.heardNow.push(text);
      }
    } catch {
      // the ear failing leaves the caller deaf, not the call broken: it still answers what it heard
    }
  }

  /** What the caller heard the agent say since the last time it asked. */
  takeHeard(): string {
    const text = this.heardNow.join(' ');
    this.heardNow = [];
    return text;
  }

  /** Speaks `text`: synthesized by the caller's TTS, the behaviours applied; resolves once it has been sent. */
  async prepare(
    text: string,
    turn: { pause: boolean; silence: boolean },
  ): Promise<{ pcm: Int16Array; speech: Int16Array }> {
    const b = this.opts.behaviour;
    this.ttsCharacters += text.length;
    const chunks: AudioFrame[] = [];
    for await (const audio of this.opts.tts.synthesize(text)) chunks.push(audio.frame);
    let speech: Int16Array = new Int16Array(0);
    if (chunks.length > 0) {
      const frame = oneFrame(chunks);
      speech = frame.data;
      if (frame.sampleRate !== CALLER_RATE) {
        const r = new AudioResampler(frame.sampleRate, CALLER_RATE, 1);
        const out = [...r.push(frame), ...r.flush()];
        r.close();
        speech = concatPcm(out.map((f) => f.data));
      }
    }
    const rms = speechRms(speech);
    if (this.noise && !this.noiseCalibrated && rms > 0) {
      // the noise's level is set against the caller's own speech, once its voice is known
      this.noiseRms = rms / 10 ** (b.noise!.snrDb / 20);
      this.noiseCalibrated = true;
    }
    let pcm = speech;
    if (turn.pause && b.midSentencePause) {
      const cut = pausePoint(speech);
      pcm = concatPcm([speech.subarray(0, cut), silence(b.midSentencePause.ms), speech.subarray(cut)]);
    }
    if (turn.silence && b.silenceBeforeAnswer) pcm = concatPcm([silence(b.silenceBeforeAnswer.ms), pcm]);
    return { pcm, speech };
  }

  /** Queues a prepared line; resolves once its last frame has gone out, or at once when the call stopped. */
  say(pcm: Int16Array, bargeIn: boolean): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.lines.push({ pcm, at: 0, bargeIn, done: resolve });
    });
  }

  private tick(): void {
    if (this.stopped) return;
    const due = Math.floor((Date.now() - this.t0) / FRAME_MS);
    // a late timer catches up; beyond a second behind, the lost time is skipped rather than burst
    if (due - this.frame > 50) this.frame = due - 50;
    while (this.frame < due) this.step();
    for (const l of [...this.listeners]) l();
  }

  /** One 20 ms frame each way. */
  private step(): void {
    const out = new Int16Array(FRAME_SAMPLES);
    const line = this.lines[0];
    let speaking = false;
    if (line) {
      const n = Math.min(FRAME_SAMPLES, line.pcm.length - line.at);
      out.set(line.pcm.subarray(line.at, line.at + n));
      line.at += n;
      speaking = isAudible(out);
      if (speaking) {
        line.span ??= { startFrame: this.frame, endFrame: this.frame + 1 };
        line.span.endFrame = this.frame + 1;
      }
      if (line.at >= line.pcm.length) {
        this.lines.shift();
        if (line.span) this.timeline.lines.push({ ...line.span, bargeIn: line.bargeIn });
        line.done();
      }
    }
    let sentPower: number | undefined;
    if (this.noise) {
      this.noise.mixInto(out, this.noiseRms);
      // the SNR is measured once the level is the one asked for
      if (this.noiseCalibrated) sentPower = powerOf(out);
    }
    this.opts.send(out);
    const heard = this.agentOut;
    this.playback?.play(heard);
    const agentAudible = isAudible(heard);
    if (agentAudible) this.lastAgentFrame = this.frame;
    this.hearFrame(heard, agentAudible);
    this.timeline.add(speaking, agentAudible, sentPower);
    this.frame++;
  }

  /** The frame the caller just played, to its ear. */
  private hearFrame(heard: Int16Array, audible: boolean): void {
    // a copy: the frame lives on in the STT's queue
    const frame = new AudioFrame(heard.slice(), CALLER_RATE, 1, FRAME_SAMPLES);
    if (this.sttStream) {
      this.sttStream.pushFrame(frame);
      this.sttAudioSamples += FRAME_SAMPLES;
      return;
    }
    if (audible || this.speechFrames.length > 0) this.speechFrames.push(frame);
    // the agent's speech ended (quiet past a gap between sentences): its words go to the STT at once
    if (!audible && this.speechFrames.length > 0 && this.agentQuietMs >= EAR_GAP_MS) {
      const frames = this.speechFrames;
      this.speechFrames = [];
      this.sttAudioSamples += frames.length * FRAME_SAMPLES;
      this.pendingRecognitions++;
      this.opts.stt
        .recognize(oneFrame(frames))
        .then((ev) => {
          const text = ev.alternatives?.[0]?.text.trim();
          if (text) this.heardNow.push(text);
        })
        // the ear failing leaves the caller deaf, not the call broken: it still answers what it heard
        .catch(() => undefined)
        .finally(() => this.pendingRecognitions--);
    }
  }

  /**
   * Resolves when `done()` holds on a tick, or after `timeoutMs`, or when the call stops. Asked after the call
   * stopped (the flow ended it while the caller was between two waits), it answers at once: no tick comes to
   * check it any more.
   */
  until(done: () => boolean, timeoutMs: number): Promise<boolean> {
    if (this.stopped) return Promise.resolve(done());
    return new Promise((resolve) => {
      const deadline = Date.now() + timeoutMs;
      const check = () => {
        const ok = done();
        if (ok || this.stopped || Date.now() >= deadline) {
          this.listeners.delete(check);
          resolve(ok);
        }
      };
      this.listeners.add(check);
    });
  }

  /** Milliseconds since the agent was last heard (Infinity: never). */
  get agentQuietMs(): number {
    return this.lastAgentFrame < 0 ? Infinity : (this.frame - 1 - this.lastAgentFrame) * FRAME_MS;
  }

  /** Whether the agent was heard at or after frame `from`. */
  agentHeardSince(from: number): boolean {
    return this.lastAgentFrame >= from;
  }

  /** The ear has words the caller has not taken yet, and is not still listening to any. */
  get hasHeard(): boolean {
    return this.heardNow.length > 0 && this.pendingRecognitions === 0 && this.speechFrames.length === 0;
  }

  get framesSent(): number {
    return this.frame;
  }

  get agentSpeaking(): boolean {
    return this.agentQuietMs < FRAME_MS * 2 || (this.playback?.pending ?? false);
  }

  /** The caller's TTS and STT use, as usage entries of the simulator. */
  usage(): ModelUsage[] {
    return [
      {
        kind: 'tts',
        provider: this.opts.ttsId.provider,
        model: this.opts.ttsId.model,
        ttsCharacters: this.ttsCharacters,
      },
      {
        kind: 'stt',
        provider: this.opts.sttId.provider,
        model: this.opts.sttId.model,
        sttAudioSeconds: Math.round((this.sttAudioSamples / CALLER_RATE) * 100) / 100,
      },
    ];
  }

  /** Stops the clock and the ear; lines not yet sent resolve at once. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    for (const l of this.lines.splice(0)) l.done();
    for (const l of [...this.listeners]) l();
    this.playback?.close();
    this.sttStream?.close();
  }
}

const silence = (ms: number) => new Int16Array(Math.round((ms / 1000) * CALLER_RATE));

function concatPcm(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * Frames of one rate as one frame. LiveKit's own `mergeFrames` (which `recognize` and `collect` use on a list)
 * copies everything so far for each frame it adds: quadratic, and a third of a loaded playground's CPU in a
 * profile of 10 calls (docs/performance.md); this copies each sample once.
 */
export function oneFrame(frames: AudioFrame[]): AudioFrame {
  const first = frames[0]!;
  const data = concatPcm(frames.map((f) => f.data));
  return new AudioFrame(data, first.sampleRate, first.channels, data.length / first.channels);
}
