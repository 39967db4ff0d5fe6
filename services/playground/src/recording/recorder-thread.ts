import { Worker } from 'node:worker_threads';
import type { AudioFrame } from '@livekit/rtc-node';
import { safeError, type Logger } from '@vab/bus';
import { builtScript } from './built-script.js';
import type { TimelineIn, TimelineOut } from './recorder-timeline.js';

/**
 * How long messages to the thread are gathered before they go, in one: a frame's message alone cost the
 * session's loop ~14 µs (a CPU profile at 50 sessions: more than the timeline work it moved away). A recording
 * has no use for sooner; its last flush waits at most this long more.
 */
const BATCH_MS = 100;

/** Where one recording's settled PCM goes. */
export interface TimelineSink {
  /** Interleaved 16-bit stereo PCM, in order. */
  block(pcm: Int16Array): void;
  /** The timeline is done: every block has been handed over. */
  ended(droppedSamples: [number, number]): void;
  /** The thread died: no more blocks will come. */
  failed(err: Error): void;
}

/**
 * The recordings' timeline thread (`recorder-timeline.ts` says why it is one): one per process, started with
 * the first recording, shared by all. A frame costs the session's loop a copy, and a place in a batch.
 */
export class RecorderThread {
  private worker: Worker | undefined;
  private next = 1;
  private readonly sinks = new Map<number, TimelineSink>();
  private batch: TimelineIn[] = [];
  private transfer: ArrayBuffer[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly log: Logger) {}

  /** A recording's timeline from `t0` (wall ms) at `sampleRate`: its id for the calls below. */
  open(t0: number, sampleRate: number, sink: TimelineSink): number {
    const id = this.next++;
    this.sinks.set(id, sink);
    this.post({ op: 'open', id, t0, sampleRate });
    return id;
  }

  /**
   * A frame of a channel that began at `startedAt`. `owned`: nothing else holds the frame's data (the
   * recorder's slice of played audio), so its buffer moves to the thread instead of being copied.
   */
  captured(id: number, channel: 0 | 1, startedAt: number, frame: AudioFrame, owned: boolean): void {
    const { data } = frame;
    const whole = owned && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
    const own = whole ? data : data.slice();
    const { sampleRate, channels } = frame;
    this.post({ op: 'captured', id, channel, startedAt, sampleRate, channels, data: own }, [
      own.buffer as ArrayBuffer,
    ]);
  }

  flush(id: number, until: number): void {
    this.post({ op: 'flush', id, until });
  }

  end(id: number): void {
    this.post({ op: 'end', id });
  }

  /** Ends the thread; the recordings still open (none, after the sessions stopped) fail. */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.batch = [];
    this.transfer = [];
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
    this.fail(new Error('the recording timeline thread stopped'));
  }

  private fail(err: Error): void {
    for (const [id, sink] of this.sinks) {
      this.sinks.delete(id);
      sink.failed(err);
    }
  }

  /** Queued for the next batch: a message per frame cost the session's loop more than the work it moved. */
  private post(msg: TimelineIn, transfer: ArrayBuffer[] = []): void {
    this.batch.push(msg);
    this.transfer.push(...transfer);
    this.timer ??= setTimeout(() => this.send(), BATCH_MS);
  }

  private send(): void {
    this.timer = undefined;
    const batch = this.batch;
    const transfer = this.transfer;
    this.batch = [];
    this.transfer = [];
    this.thread().postMessage(batch, transfer);
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(builtScript(import.meta.url, 'recorder-timeline.js'));
    // the thread must not keep a stopping process alive: the recordings it holds end with their sessions
    worker.unref();
    worker.on('message', (msg: TimelineOut) => {
      const sink = this.sinks.get(msg.id);
      if (!sink) return;
      if (msg.op === 'block') return sink.block(msg.pcm);
      this.sinks.delete(msg.id);
      sink.ended(msg.droppedSamples);
    });
    const lost = (err: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (this.sinks.size > 0) {
        this.log.warn(
          { code: 'RECORDING_AUDIO_DROPPED', err: safeError(err) },
          'recording timeline thread ended',
        );
      }
      this.fail(err);
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`the recording timeline thread exited ${code}`)));
    this.worker = worker;
    return worker;
  }
}
