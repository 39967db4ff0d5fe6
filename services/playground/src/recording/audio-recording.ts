import { open, rm, stat } from 'node:fs/promises';
import type { voice } from '@livekit/agents';
import { safeError, type BusClient, type Logger } from '@vab/bus';
import { Subjects, type Recording, type SessionEventInput } from '@vab/contracts';
import type { EncoderHost } from './encoder-host.js';
import type { RecorderThread } from './recorder-thread.js';
import { loadRecorderIO, type RecorderIO } from './recorder-io.js';
import { RecordingUpload } from './recording-upload.js';
import type { RecordingsBucket } from './recordings-bucket.js';
import { spoolFile } from './spool.js';

/**
 * The recording's rate when the call's own is not known: the agent's voice as the TTS made it (24 kHz:
 * OpenAI's, ElevenLabs' at most). Otherwise a call is recorded at its own rate, the one its audio output plays
 * at (LiveKit has already resampled the agent's voice to it) and its caller sends: then neither channel is
 * resampled again. At 16 kHz callers, resampling both channels to 24 kHz was a third of the recorder's cost on
 * the event loop (a native call per frame; CPU profile at 50 sessions). LiveKit's default (48 kHz) cost 3.3 %
 * of a core per session here, 24 kHz 1.8 % (bench/recordings.mjs).
 */
const FALLBACK_SAMPLE_RATE = 24_000;

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
  /**
   * Names the stored recording on its record; default: the test session's (`sessions.test-sessions.recording`).
   * A call's is `sessions.calls.recording`.
   */
  named?: ((recording: Recording) => Promise<unknown>) | undefined;
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
  /** The recording written to the bucket as it is made (decision 35). */
  private upload: RecordingUpload | undefined;

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
      this.file = await spoolFile(this.deps.sessionId);
      this.recorder = recorder;
      await recorder.start(this.file);
      const startedAt = recorder.recordingStartedAt!;
      this.startedAt = startedAt;
      // the event's `at` is the recording's zero, the very number the record's `startedAt` stores
      this.deps.emit({ type: 'recording_started', sampleRate }, startedAt);
      // written to the bucket while it is made: a killed instance leaves what it recorded (decision 35)
      const { bucket } = this.deps;
      this.upload = new RecordingUpload({
        file: this.file,
        chunks: bucket.chunks(this.deps.agentId, this.deps.sessionId, startedAt),
        flushMs: bucket.flushMs,
        retryMs: bucket.flushRetryMs,
        log: this.deps.log,
      });
      this.upload.start();
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
    const { recorder, file, startedAt, upload } = this;
    if (!recorder || !file || startedAt === undefined) return;
    const { bus, agentId, sessionId, log } = this.deps;
    let finishing = false;
    try {
      // idempotent: the session's close has usually closed it already
      await recorder.close();
      if (!upload) return;
      // stored and sealed, or not kept (logged, its chunks removed)
      finishing = true;
      const stored = await upload.finish(() => oggDurationMs(file));
      if (!stored) return;
      const recording: Recording = { ...stored, startedAt };
      if (this.deps.named) {
        await this.deps.named(recording);
      } else {
        // the session's id as the request's, as for its transcript: the lines are found by the session
        await bus.request(
          Subjects.testSessionsRecording,
          { agentId, sessionId, recording },
          { timeoutMs: this.deps.timeoutMs, requestId: sessionId },
        );
      }
    } catch (err) {
      log.warn({ code: 'RECORDING_NOT_STORED', err: safeError(err) }, 'recording not stored');
      // the recorder did not close: the chunks written during the call would be named by nothing (the owner
      // sweep salvages only a lost instance's) and hold the bucket's bytes until they age out. A sealed
      // recording stays: its naming may have landed though its answer did not.
      if (!finishing) await upload?.discard().catch(() => undefined);
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
