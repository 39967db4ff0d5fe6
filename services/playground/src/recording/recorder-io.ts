import { PassThrough } from 'node:stream';
import type { voice } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';
import { agentsModule } from './agents-module.js';
import type { EncoderHost } from './encoder-host.js';
import type { RecorderThread } from './recorder-thread.js';

export type RecorderIO = NonNullable<voice.AgentSession['_recorderIO']>;
type RecorderIOClass = new (
  opts: { agentSession: voice.AgentSession; sampleRate?: number },
  encoders: EncoderHost,
  timeline: RecorderThread,
) => RecorderIO;

let recorderClass: Promise<RecorderIOClass> | undefined;

/**
 * Opus at 32 kbit/s for the two channels, constrained VBR, encoder complexity 5 of 10: speech stays clear, a call
 * costs ≤ 4 KB/s kept, and the encoder a quarter of its default CPU. FFmpeg's libopus defaults (96 kbit/s for
 * stereo, complexity 10: what LiveKit's recorder gets) kept 14.8 KB/s of a spoken session here; on 37 s of
 * two-channel speech at 24 kHz complexity 10 took 0.53 s of CPU, 5 took 0.13 s (bench/recordings.mjs).
 */
const OPUS = ['-b:a', '32k', '-vbr', 'constrained', '-compression_level', '5'];

/** What RecorderIO 1.9.0 queues for its encode task: a captured frame of a channel, or a settled moment. */
type RecorderItem =
  | { kind: 'captured'; channel: 0 | 1; startedAt: number; frame: AudioFrame }
  | { kind: 'flush'; until: number };

/** Sees each frame of an audio input as the input hands it to the session. */
export type FrameTap = (frame: AudioFrame) => void;

/**
 * An audio input the recorder can hear without a stream of its own in between: LiveKit's recorder otherwise
 * puts one in front of the input (a read, a write and a transform per frame: 4.5 % of the playground's CPU
 * at 50 sessions, its largest share of the recorder's cost).
 */
export interface TappableAudioInput {
  /** Until the returned function is called. */
  tap(tap: FrameTap): () => void;
}

const isTappable = (input: voice.AudioInput): input is voice.AudioInput & TappableAudioInput =>
  typeof (input as Partial<TappableAudioInput>).tap === 'function';

/** The fields of RecorderIO 1.9.0 that the overrides below set and read. */
interface RecorderState {
  pcmStream?: PassThrough;
  ffmpegPromise?: Promise<void>;
  sampleRate: number;
  _outputPath?: string;
  t0?: number;
  inputSettled: number;
  inRecord?: { close(): Promise<void> };
  started: boolean;
  closing: boolean;
  chan: { closed: boolean; stream(): ReadableStream<RecorderItem> };
  closeFuture: { done: boolean; resolve(): void };
  logger: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
  startFFmpeg(): void;
  enqueue(item: RecorderItem): void;
}

/**
 * The caller's channel: as LiveKit's `RecorderAudioInput` (a frame is placed where it began, and the user
 * channel is settled up to its end), but from the input's tap rather than a stream in front of it.
 */
function tapInput(rec: RecorderState, input: voice.AudioInput & TappableAudioInput): voice.AudioInput {
  const untap = input.tap((frame) => {
    if (!rec.started) return;
    const durationMs = (frame.samplesPerChannel / frame.sampleRate) * 1000;
    const startedAt = Date.now() - durationMs;
    rec.inputSettled = startedAt + durationMs;
    rec.enqueue({ kind: 'captured', channel: 0, startedAt, frame });
  });
  // what `start()` checks is there and `close()` closes
  rec.inRecord = { close: async () => void untap() };
  return input;
}

const LATE = 'recorder dropped audio that reached it after its place in the timeline had been written';

/**
 * The encoder finishes what it was given and exits: at the recording's end, and when the timeline is lost (its
 * thread ended), rather than wait on its pipe for the rest. Rejects as the encoder failed.
 */
async function finishEncoder(rec: RecorderState): Promise<void> {
  if (rec.pcmStream && !rec.pcmStream.writableEnded) rec.pcmStream.end();
  await rec.ffmpegPromise;
}

/** A recording's timeline on the thread: its id, and its end (with what arrived too late, per channel). */
function openTimeline(
  timeline: RecorderThread,
  t0: number,
  sampleRate: number,
  write: (pcm: Int16Array) => void,
) {
  let id!: number;
  const ended = new Promise<[number, number]>((resolve, reject) => {
    id = timeline.open(t0, sampleRate, { block: write, ended: resolve, failed: reject });
  });
  // awaited once the recording's queue is done; a thread lost before then must not be an unhandled rejection
  ended.catch(() => undefined);
  return { id, ended };
}

/**
 * LiveKit's own recorder (`RecorderIO`: the user's audio where it arrived, the agent's where the output reports
 * it played, one stereo Ogg Opus file through the FFmpeg that @livekit/agents bundles, or LIVEKIT_FFMPEG_PATH).
 * AgentSession uses it only under a job context and @livekit/agents 1.9.0 does not export it, so it is loaded
 * from the package's own file, the very module the session's `_recorderIO` is typed with (the version is
 * pinned exactly). Three changes, each with no option in LiveKit:
 * - its encoder gets a bitrate and a complexity, and is started by the encoder host (never forked from here);
 * - it hears a tappable input (ours) at the input, as LiveKit's stream in front of it would;
 * - its timeline (LiveKit's own `Track`s, the same placing and settling) runs on the recorder thread, not in
 *   the sessions' event loop (`recorder-timeline.ts` says what that cost): `enqueue` posts there what LiveKit
 *   queued for its encode task, and the encode task writes the blocks the thread settles.
 * The same FFmpeg, input and output otherwise. tests/integration/voice/recordings.test.ts bounds the bytes per second
 * and the channels' content, so a release that renamed a method would fail there.
 */
export function loadRecorderIO(): Promise<RecorderIOClass> {
  recorderClass ??= (async () => {
    const { RecorderIO } = await agentsModule<{ RecorderIO: RecorderIOClass }>(
      'voice',
      'recorder_io',
      'index.js',
    );
    const { resolveFfmpegPath } = await agentsModule<{ resolveFfmpegPath(): string | undefined }>(
      'ffmpeg.js',
    );
    const ffmpegPath = resolveFfmpegPath() ?? 'ffmpeg';
    const Base = RecorderIO as unknown as new (...args: unknown[]) => {
      recordInput(input: voice.AudioInput): voice.AudioInput;
    };
    class CompactRecorderIO extends Base {
      private timelineId: number | undefined;

      constructor(
        opts: unknown,
        private readonly encoders: EncoderHost,
        private readonly timeline: RecorderThread,
      ) {
        super(opts);
      }

      startFFmpeg(this: RecorderState & CompactRecorderIO): void {
        if (this.pcmStream) return;
        const pcm = new PassThrough();
        this.pcmStream = pcm;
        const rate = String(this.sampleRate);
        const fifo = `${this._outputPath!}.pcm`;
        // as LiveKit's: 16-bit stereo PCM in, Ogg Opus out, at the recording's rate; plus the encoder's settings
        const args = ['-hide_banner', '-loglevel', 'error', '-f', 's16le', '-ar', rate, '-ac', '2'];
        args.push('-i', fifo, '-c:a', 'libopus', ...OPUS, '-ac', '2', '-ar', rate);
        // each packet written out as it is muxed: the file's pages reach the bucket while the call runs (decision 35)
        args.push('-flush_packets', '1', '-f', 'ogg', '-y', this._outputPath!);
        // started by the encoder host, never forked from here (encoder-process.ts says why)
        this.ffmpegPromise = this.encoders.encode(ffmpegPath, args, fifo, pcm);
      }

      /**
       * The caller's channel: as LiveKit's `RecorderAudioInput` (a frame is placed where it began, and the
       * user channel is settled up to its end), but from the input's tap rather than a stream in front of it.
       */
      override recordInput(input: voice.AudioInput): voice.AudioInput {
        return isTappable(input)
          ? tapInput(this as unknown as RecorderState, input)
          : super.recordInput(input);
      }

      /** LiveKit's queue to its encode task, as the recorder thread's input (same conditions). */
      enqueue(this: RecorderState & CompactRecorderIO, item: RecorderItem): void {
        const id = this.timelineId;
        if (!this.started || this.closing || this.chan.closed || id === undefined) return;
        if (item.kind === 'flush') return this.timeline.flush(id, item.until);
        // the agent's channel is the recorder's own slice of what played; the caller's frame goes on to the VAD
        this.timeline.captured(id, item.channel, item.startedAt, item.frame, item.channel === 1);
      }

      /**
       * LiveKit's encode task, with the timeline on the recorder thread: started by `start()`, ended by
       * `close()`, whose last flush still comes through LiveKit's queue.
       */
      async encode(this: RecorderState & CompactRecorderIO): Promise<void> {
        if (!this._outputPath || this.t0 === undefined) return;
        const { id, ended } = openTimeline(this.timeline, this.t0, this.sampleRate, (pcm) => {
          if (!this.pcmStream) this.startFFmpeg();
          this.pcmStream!.write(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
        });
        this.timelineId = id;
        const reader = this.chan.stream().getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            if (value.kind === 'flush') this.timeline.flush(id, value.until);
          }
          this.timeline.end(id);
          const [input, output] = await ended;
          if (input + output > 0) this.logger.warn({ code: 'RECORDING_AUDIO_DROPPED', input, output }, LATE);
          await finishEncoder(this);
        } catch (err) {
          this.logger.error({ err }, 'Error in encode task');
          await finishEncoder(this).catch(() => undefined);
        } finally {
          this.timelineId = undefined;
          reader.releaseLock();
          if (!this.closeFuture.done) this.closeFuture.resolve();
        }
      }
    }
    return CompactRecorderIO as unknown as RecorderIOClass;
  })();
  return recorderClass;
}
