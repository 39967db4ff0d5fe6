import { stt as livekitStt, type stt, type tts } from '@livekit/agents';
import { AudioFrame, AudioResampler } from '@livekit/rtc-node';
import { concatPcm, pcmSilence, type CallerBehaviour, type ModelUsage } from '@vab/contracts';
import { isAudible, oneFrame, powerOf } from '../voice/pcm.js';
import type { PlaybackHooks } from '../voice/playback.js';
import { CALLER_RATE, FRAME_SAMPLES, pausePoint, speechRms } from './caller-line.js';
import { CallerPlayback } from './caller-playback.js';
import { Noise } from './noise.js';
import { seededRandom } from './seeded-random.js';
import { CallTimeline, FRAME_MS } from './voice-figures.js';

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
      pcm = concatPcm([
        speech.subarray(0, cut),
        pcmSilence(b.midSentencePause.ms, CALLER_RATE),
        speech.subarray(cut),
      ]);
    }
    if (turn.silence && b.silenceBeforeAnswer)
      pcm = concatPcm([pcmSilence(b.silenceBeforeAnswer.ms, CALLER_RATE), pcm]);
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
