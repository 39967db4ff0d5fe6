import { voice } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import type { VoiceServerMessage } from '@vab/contracts';
import type { FrameTap, TappableAudioInput } from '../recording/recorder-io.js';
import { heardPart } from './playback.js';
import { isAudible, Resampled } from './pcm.js';

/**
 * The client's microphone as LiveKit's audio input: 16-bit mono PCM at the client's rate, as it arrives over
 * the bus (the gateway checked its size and pace), handed to LiveKit in frames of `INPUT_FRAME_MS`. The
 * session's VAD and STT resample.
 *
 * LiveKit reads `stream`; here it is one stream the frames are put straight into, instead of the base class's
 * `MultiInputStream` (a stream of ours pumped into one of its own: two more reads and writes per frame, for
 * inputs swapped at run time, which this one never is). The session re-reads it after an agent handover: each
 * activity releases its reader when it ends, as it does with the base class's stream.
 */
export class BusAudioInput extends voice.AudioInput implements TappableAudioInput {
  private readonly frames: ReadableStream<AudioFrame>;
  private controller!: ReadableStreamDefaultController<AudioFrame>;
  private closed = false;
  /** Its reader cancelled the stream: it takes no more frames. */
  private cancelled = false;
  private taps = new Set<FrameTap>();
  /** The frame being filled, and how many of its samples are. */
  private frame: Int16Array;
  private filled = 0;

  constructor(private readonly sampleRate: number) {
    super();
    this.frame = new Int16Array((sampleRate * INPUT_FRAME_MS) / 1000);
    this.frames = new ReadableStream<AudioFrame>(
      {
        start: (controller) => void (this.controller = controller),
        // a reader that cancels (LiveKit does not) ends the input: nothing more is put into it
        cancel: () => void (this.cancelled = true),
      },
      { highWaterMark: MAX_QUEUED_FRAMES },
    );
  }

  override get stream(): ReadableStream<AudioFrame> {
    return this.frames;
  }

  /**
   * The client's audio as it arrives, gathered into whole frames (what is left of the last one when the
   * client stops is never heard: less than a frame). LiveKit's agent activity reads them as they come, into a
   * queue of its own; they wait here only while no activity reads (before the session starts, and between the
   * agents of a handover), up to about 5 s, and past that newer ones are dropped rather than queued without a
   * bound.
   */
  push(pcm: Int16Array): void {
    if (this.closed || this.cancelled) return;
    for (let at = 0; at < pcm.length;) {
      const n = Math.min(pcm.length - at, this.frame.length - this.filled);
      this.frame.set(pcm.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled < this.frame.length) break;
      const full = this.frame;
      this.frame = new Int16Array(full.length);
      this.filled = 0;
      if ((this.controller.desiredSize ?? 0) <= 0) continue;
      const frame = new AudioFrame(full, this.sampleRate, 1, full.length);
      for (const tap of this.taps) tap(frame);
      this.controller.enqueue(frame);
    }
  }

  /** Sees every frame handed to LiveKit, as it goes (the recorder's: no stream of its own in between). */
  tap(tap: FrameTap): () => void {
    this.taps.add(tap);
    return () => this.taps.delete(tap);
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.cancelled) this.controller.close();
    await super.close();
  }
}

/**
 * How much of the client's audio LiveKit gets at a time: two of the client's default 20 ms frames. Every frame
 * crosses several streams on its way to the VAD, the STT and the end-of-turn model, so at 20 ms a session cost
 * ~30 % more CPU (docs/performance.md). LiveKit's Python agents take a room's audio in 50 ms frames; at 50 the
 * end-of-turn model's view of a pause depended on where the frames fell (a mid-sentence pause ended the turn in
 * 1 of 3 runs of voice.test.ts), at 40 it did not (5 of 5).
 */
export const INPUT_FRAME_MS = 40;

/** Frames of input a stalled pipeline may have queued before newer ones are dropped (~5 s). */
const MAX_QUEUED_FRAMES = 5000 / INPUT_FRAME_MS;

export interface BusAudioOutputOptions {
  /** The client's rate: the agent's audio is resampled to it. */
  sampleRate: number;
  send(message: VoiceServerMessage | Int16Array): void;
  /** The text of the reply being played (for what an interrupted one keeps). */
  replyText(): string | undefined;
  /** The first audible frame of a segment goes out now. */
  onAudible?(at: number): void;
  /** How long to wait for the client's report beyond the audio's own length (a client that never reports). */
  ackGraceMs: number;
}

interface Segment {
  startedAt: number;
  pushedMs: number;
  /** No more frames come (flushed or cleared). */
  complete: boolean;
  /** Flushed before any interruption: `pushedMs` is the whole reply's audio. */
  flushed: boolean;
  interrupted: boolean;
  audible: boolean;
  timer?: NodeJS.Timeout;
}

/**
 * The agent's voice to the client, with LiveKit's playout handshake done by the client: frames go out as
 * LiveKit makes them (faster than real time; the client buffers and plays), `playback_flush` ends a segment,
 * `playback_clear` stops it (an interruption), and the client's `playback_finished` says how much was heard.
 * Only then does LiveKit learn the segment finished — so an interrupted reply keeps only what was played.
 * A client that never reports is not waited for beyond the audio's length plus a grace.
 */
export class BusAudioOutput extends voice.AudioOutput {
  private segment: Segment | undefined;
  /** The agent's audio at the client's rate. */
  private readonly toClientRate: Resampled;
  /** What the client was last told: paused or playing. */
  private paused = false;

  constructor(private readonly opts: BusAudioOutputOptions) {
    super(opts.sampleRate, undefined, { pause: true });
    this.toClientRate = new Resampled(opts.sampleRate);
  }

  override async captureFrame(frame: AudioFrame): Promise<void> {
    await super.captureFrame(frame);
    let seg = this.segment;
    if (!seg || seg.complete) {
      // a segment still awaiting its report when the next starts is done as far as LiveKit cares
      if (seg) this.settle(seg.pushedMs, false);
      seg = {
        startedAt: Date.now(),
        pushedMs: 0,
        complete: false,
        flushed: false,
        interrupted: false,
        audible: false,
      };
      this.segment = seg;
      this.onPlaybackStarted(seg.startedAt);
    }
    seg.pushedMs += (frame.samplesPerChannel / frame.sampleRate) * 1000;
    for (const out of this.toClientRate.push(frame)) {
      if (!seg.audible && isAudible(out.data)) {
        seg.audible = true;
        this.opts.onAudible?.(Date.now());
      }
      this.opts.send(out.data);
    }
  }

  override flush(): void {
    super.flush();
    this.opts.send({ type: 'playback_flush' });
    const seg = this.segment;
    if (!seg || seg.complete) return;
    seg.complete = true;
    seg.flushed = true;
    const left = Math.max(0, seg.startedAt + seg.pushedMs - Date.now());
    this.waitForReport(seg, left + this.opts.ackGraceMs);
  }

  override clearBuffer(): void {
    this.opts.send({ type: 'playback_clear' });
    const seg = this.segment;
    if (!seg || seg.interrupted) return;
    seg.interrupted = true;
    if (!seg.complete) super.flush();
    seg.complete = true;
    this.waitForReport(seg, this.opts.ackGraceMs);
  }

  /**
   * LiveKit pauses the output on every VAD inference the caller's speech lasts (~50 times in one barge-in) and
   * resumes it before every reply: the client hears of a change only, once.
   */
  override pause(): void {
    super.pause();
    if (this.paused) return;
    this.paused = true;
    this.opts.send({ type: 'playback_pause' });
  }

  override resume(): void {
    super.resume();
    if (!this.paused) return;
    this.paused = false;
    this.opts.send({ type: 'playback_resume' });
  }

  /** The client's `playback_finished`. */
  reported(playedMs: number, interrupted: boolean): void {
    const seg = this.segment;
    if (!seg?.complete) return;
    this.settle(Math.min(playedMs, seg.pushedMs), interrupted || seg.interrupted);
  }

  private waitForReport(seg: Segment, ms: number): void {
    clearTimeout(seg.timer);
    seg.timer = setTimeout(() => {
      if (this.segment !== seg) return;
      // no report: what wall-clock time says could have played
      this.settle(Math.min(seg.pushedMs, Date.now() - seg.startedAt), seg.interrupted);
    }, ms);
    seg.timer.unref();
  }

  private settle(playedMs: number, interrupted: boolean): void {
    const seg = this.segment;
    if (!seg) return;
    clearTimeout(seg.timer);
    this.segment = undefined;
    const text = interrupted ? this.opts.replyText() : undefined;
    this.onPlaybackFinished({
      playbackPosition: playedMs / 1000,
      interrupted,
      ...(text !== undefined
        ? { synchronizedTranscript: heardPart(text, playedMs, seg.flushed ? seg.pushedMs : undefined) }
        : {}),
    });
  }

  /** Ends any segment still awaiting its report (the session closes). */
  close(): void {
    const seg = this.segment;
    if (seg) this.settle(Math.min(seg.pushedMs, Date.now() - seg.startedAt), true);
    this.toClientRate.close();
  }
}
