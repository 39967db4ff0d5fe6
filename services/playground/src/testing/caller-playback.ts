import { voice } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';
import { isAudible, Resampled } from '../voice/pcm.js';
import { heardPart, type PlaybackHooks } from '../voice/playback.js';
import { CALLER_RATE } from './caller-line.js';

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
  /** The agent's audio at the caller's rate. */
  private readonly toCallerRate = new Resampled(CALLER_RATE);
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
    for (const f of this.toCallerRate.push(frame)) this.enqueue(f.data, seg);
  }

  private enqueue(data: Int16Array, seg: Segment): void {
    this.queue.push({ data, seg });
    seg.queuedSamples += data.length;
  }

  override flush(): void {
    super.flush();
    const seg = this.segments.at(-1);
    if (!seg || seg.flushed) return;
    for (const f of this.toCallerRate.flush()) this.enqueue(f.data, seg);
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
    this.toCallerRate.close();
  }
}
