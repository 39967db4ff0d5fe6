import { mkdir, open, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { voice } from '@livekit/agents';
import type { AudioFrame } from '@livekit/rtc-node';
import { safeError, type BusClient, type Logger } from '@vab/bus';
import { Subjects, type Recording, type SessionEventInput } from '@vab/contracts';
import { agentsModule } from './agents-module.js';
import type { EncoderHost } from './encoder-host.js';
import type { RecorderThread } from './recorder-thread.js';
import type { RecordingsBucket } from './recordings-bucket.js';

type RecorderIO = NonNullable<voice.AgentSession['_recorderIO']>;
type RecorderIOClass = new (
  opts: { agentSession: voice.AgentSession; sampleRate?: number },
  encoders: EncoderHost,
  timeline: RecorderThread,
) => RecorderIO;

let recorderClass: Promise<RecorderIOClass> | undefined;

/**
 * The recording's rate when the call's own is not known: the agent's voice as the TTS made it (24 kHz:
 * OpenAI's, ElevenLabs' at most). Otherwise a call is recorded at its own rate, the one its audio output plays
 * at (LiveKit has already resampled the agent's voice to it) and its caller sends: then neither channel is
 * resampled again. At 16 kHz callers, resampling both channels to 24 kHz was a third of the recorder's cost on
 * the event loop (a native call per frame; CPU profile at 50 sessions). LiveKit's default (48 kHz) cost 3.3 %
 * of a core per session here, 24 kHz 1.8 % (bench/recordings.mjs).
 */
const FALLBACK_SAMPLE_RATE = 24_000;
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
 * The same FFmpeg, input and output otherwise. tests/integration/recordings.test.ts bounds the bytes per second
 * and the channels' content, so a release that renamed a method would fail there.
 */
function loadRecorderIO(): Promise<RecorderIOClass> {
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
        args.push('-f', 'ogg', '-y', this._outputPath!);
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

/** Where recordings are written before they are stored: one directory per process, emptied as they go. */
const SPOOL_PREFIX = 'vab-recordings-';
const SPOOL = join(tmpdir(), `${SPOOL_PREFIX}${process.pid}`);

/**
 * Removes what killed processes left in their spools (a recording is spooled only while its session ends, so
 * a directory whose process is gone holds nothing that will ever be stored).
 */
export async function sweepSpools(log: Logger): Promise<void> {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  const names = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const name of names) {
    const pid = Number(name.slice(SPOOL_PREFIX.length));
    if (!name.startsWith(SPOOL_PREFIX) || !Number.isInteger(pid) || pid === process.pid || alive(pid))
      continue;
    await rm(join(tmpdir(), name), { recursive: true, force: true }).catch((err: unknown) =>
      log.debug({ err: safeError(err) }, 'recording spool not removed'),
    );
  }
}

export interface AudioRecordingDeps {
  bucket: RecordingsBucket;
  encoders: EncoderHost;
  timeline: RecorderThread;
  bus: BusClient;
  agentId: string;
  sessionId: string;
  /** Adds an event to the session's stream, at `at`. */
  emit(event: SessionEventInput, at: number): void;
  log: Logger;
  timeoutMs: number;
}

/**
 * One voice session's recording: started on the session's audio once it runs, closed by the session's own
 * close (LiveKit closes its recorder before it detaches the audio), then stored in the recordings bucket and
 * named on the test session's record. A recording that cannot be made or stored is logged, never fatal.
 */
export class AudioRecording {
  private recorder: RecorderIO | undefined;
  private file: string | undefined;
  private startedAt: number | undefined;
  private finished: Promise<void> | undefined;

  constructor(private readonly deps: AudioRecordingDeps) {}

  /**
   * Wraps the session's audio input and output, and starts writing. Before `session.start`: once the session
   * reads its input, the input cannot be wrapped (its stream is locked).
   */
  async begin(session: voice.AgentSession): Promise<void> {
    if (this.finished || this.recorder) return;
    const { input, output } = session;
    if (!input.audio || !output.audio) return;
    const sampleRate = output.audio.sampleRate ?? FALLBACK_SAMPLE_RATE;
    try {
      const RecorderIO = await loadRecorderIO();
      const recorder: RecorderIO = new RecorderIO(
        { agentSession: session, sampleRate },
        this.deps.encoders,
        this.deps.timeline,
      );
      input.audio = recorder.recordInput(input.audio);
      output.audio = recorder.recordOutput(output.audio);
      // the session closes its recorder at its own close, before it detaches the audio (agent_session.closeImpl)
      session._recorderIO = recorder;
      // a call's audio is the caller's: only this process's user may read it while it waits to be stored
      await mkdir(SPOOL, { recursive: true, mode: 0o700 });
      this.file = join(SPOOL, `${this.deps.sessionId}.ogg`);
      this.recorder = recorder;
      await recorder.start(this.file);
      const startedAt = recorder.recordingStartedAt!;
      this.startedAt = startedAt;
      // the event's `at` is the recording's zero, the very number the record's `startedAt` stores
      this.deps.emit({ type: 'recording_started', sampleRate }, startedAt);
    } catch (err) {
      this.deps.log.warn({ code: 'RECORDING_NOT_STARTED', err: safeError(err) }, 'recording not started');
    }
  }

  /** After the session stopped: the file is closed, stored and named on the record. Once. */
  finish(): Promise<void> {
    this.finished ??= this.store();
    return this.finished;
  }

  private async store(): Promise<void> {
    const { recorder, file, startedAt } = this;
    if (!recorder || !file || startedAt === undefined) return;
    const { bucket, bus, agentId, sessionId, log } = this.deps;
    try {
      // idempotent: the session's close has usually closed it already
      await recorder.close();
      const durationMs = await oggDurationMs(file);
      if (durationMs === undefined) {
        log.warn({ code: 'RECORDING_NOT_STORED', reason: 'no audio' }, 'recording not stored');
        return;
      }
      const { bytes } = await bucket.put(agentId, sessionId, file);
      const recording: Recording = { durationMs, bytes, startedAt };
      await bus.request(
        Subjects.testSessionsRecording,
        { agentId, sessionId, recording },
        { timeoutMs: this.deps.timeoutMs, requestId: sessionId },
      );
    } catch (err) {
      log.warn({ code: 'RECORDING_NOT_STORED', err: safeError(err) }, 'recording not stored');
    } finally {
      await rm(file, { force: true }).catch(() => undefined);
    }
  }
}

/**
 * An Ogg Opus file's length: the last page's granule position (48 kHz samples, whatever the input rate) less
 * the pre-skip of its OpusHead. Undefined when the file holds no audio page.
 */
export async function oggDurationMs(file: string): Promise<number | undefined> {
  const { size } = await stat(file).catch(() => ({ size: 0 }));
  if (size < 47) return undefined;
  const fd = await open(file, 'r');
  try {
    const head = Buffer.alloc(Math.min(size, 512));
    await fd.read(head, 0, head.length, 0);
    const opusHead = head.indexOf('OpusHead');
    if (opusHead < 0) return undefined;
    const preSkip = head.readUInt16LE(opusHead + 10);
    // the last page header is within the last 64 KiB (a page is at most ~64 KiB)
    const tailLength = Math.min(size, 65_536 + 282);
    const tail = Buffer.alloc(tailLength);
    await fd.read(tail, 0, tailLength, size - tailLength);
    const last = tail.lastIndexOf('OggS');
    // version 0 follows the capture pattern of a real page header
    if (last < 0 || last + 14 > tail.length || tail[last + 4] !== 0) return undefined;
    const granule = Number(tail.readBigInt64LE(last + 6));
    if (granule <= preSkip) return undefined;
    return Math.round(((granule - preSkip) / 48_000) * 1000);
  } finally {
    await fd.close();
  }
}
