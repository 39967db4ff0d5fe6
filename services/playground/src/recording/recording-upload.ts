import { open, type FileHandle } from 'node:fs/promises';
import { safeError, type Logger } from '@vab/bus';
import { oggMs, oggPages } from './ogg-pages.js';
import type { RecordingChunks } from './recordings-bucket.js';

/** The longest wait between two tries of a bucket that refuses a recording's writes. */
const MAX_BACKOFF_MS = 15_000;
/** At the call's end, tries of a bucket that was answering until then, and the wait before the second. */
const FINAL_TRIES = 3;
const FINAL_BACKOFF_MS = 500;

export interface RecordingUploadDeps {
  /** The spooled file the encoder writes the recording to. */
  file: string;
  chunks: RecordingChunks;
  /** How often the file's new pages are written to the bucket. */
  flushMs: number;
  /** How long a bucket that refuses the writes is tried (backing off) before writing stops until `finish`. */
  retryMs: number;
  log: Logger;
}

/** What `finish` stored. */
export interface StoredRecording {
  durationMs: number;
  bytes: number;
}

/**
 * A recording's file written to the bucket while the encoder makes it (decision 35): every `flushMs` its complete
 * Ogg pages so far, as the next chunks; at the end the rest, and the seal.
 *
 * A write the bucket refuses (a NATS reconnect, a leader election, the bucket full) loses nothing: what was not
 * stored stays queued in `RecordingChunks` (the very chunks, so their numbering has no hole), and the file keeps
 * the rest. The next flushes try again, backing off (`flushMs`, doubled per failure, at most 15 s); once the bucket
 * has refused for `retryMs` the flushing stops (`RECORDING_FLUSH_SUSPENDED`) and the file is read no further
 * until the call ends, which tries once more with all of it.
 */
export class RecordingUpload {
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** How far the file has been read, and what was read past its last complete page. */
  private readAt = 0;
  private pending: Buffer = Buffer.alloc(0);
  private preSkip: number | undefined;
  private durationMs: number | undefined;
  /** Writes refused in a row, since when, and when the next flush may try. */
  private failures = 0;
  private failingSince: number | undefined;
  private retryAt = 0;
  private suspended = false;

  constructor(private readonly deps: RecordingUploadDeps) {}

  /** Starts flushing every `flushMs`. */
  start(): void {
    this.timer = setInterval(() => this.tick(), this.deps.flushMs);
    this.timer.unref();
  }

  private tick(): void {
    // one flush at a time: a write held up (a timeout while NATS reconnects) is not queued behind by every tick
    if (this.flushing || this.suspended || Date.now() < this.retryAt) return;
    this.flushing = this.flush().finally(() => (this.flushing = undefined));
  }

  private async flush(): Promise<void> {
    try {
      if (!(await this.read(false))) return;
      await this.deps.chunks.write();
      if (this.failures > 0) {
        this.deps.log.info(
          { failures: this.failures, outageMs: Date.now() - this.failingSince! },
          'recording written to the bucket again',
        );
      }
      this.failures = 0;
      this.failingSince = undefined;
      this.retryAt = 0;
    } catch (err) {
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    const now = Date.now();
    this.failures++;
    this.failingSince ??= now;
    const { chunks, flushMs, retryMs, log } = this.deps;
    if (now - this.failingSince >= retryMs) {
      this.suspended = true;
      clearInterval(this.timer);
      log.warn(
        {
          code: 'RECORDING_FLUSH_SUSPENDED',
          err: safeError(err),
          failures: this.failures,
          outageMs: now - this.failingSince,
          unwrittenBytes: chunks.unwritten,
        },
        'recording not written to the bucket until its session ends',
      );
      return;
    }
    const backoffMs = Math.min(flushMs * 2 ** (this.failures - 1), MAX_BACKOFF_MS);
    this.retryAt = now + backoffMs;
    // once per outage: the tries after it are counted when it ends (or gives up)
    if (this.failures === 1)
      log.info(
        { err: safeError(err), retryInMs: backoffMs },
        'recording not written to the bucket, retrying',
      );
  }

  /**
   * Reads what the file gained and queues its complete pages (`last`: all of it, the encoder done) as chunks.
   * False when there is no file yet (the encoder makes it with its first audio).
   */
  private async read(last: boolean): Promise<boolean> {
    let fd: FileHandle;
    try {
      fd = await open(this.deps.file, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    try {
      const { size } = await fd.stat();
      if (size > this.readAt) {
        const fresh = Buffer.alloc(size - this.readAt);
        const { bytesRead } = await fd.read(fresh, 0, fresh.length, this.readAt);
        this.readAt += bytesRead;
        this.pending = Buffer.concat([this.pending, fresh.subarray(0, bytesRead)]);
      }
    } finally {
      await fd.close().catch(() => undefined);
    }
    const pages = oggPages(this.pending);
    this.preSkip ??= pages.preSkip;
    this.durationMs = oggMs(pages.granule, this.preSkip) ?? this.durationMs;
    const ready = last ? this.pending.length : pages.complete;
    if (ready > 0) {
      this.deps.chunks.add(this.pending.subarray(0, ready), this.durationMs);
      this.pending = this.pending.subarray(ready);
    }
    return true;
  }

  /** Stops writing and removes what was written (a recording not kept). */
  async discard(): Promise<void> {
    clearInterval(this.timer);
    this.suspended = true;
    await this.flushing;
    await this.deps.chunks.discard();
  }

  /**
   * After the encoder closed the file: writes the rest of it and seals the recording (a bucket that was
   * answering is tried three times; one given up on mid-call, once more). The recording stored, or undefined
   * when there is none to keep (no audio, or the bucket refused: logged, its chunks removed). Never throws.
   * `durationOf` measures the file when its pages did not say.
   */
  async finish(durationOf: () => Promise<number | undefined>): Promise<StoredRecording | undefined> {
    clearInterval(this.timer);
    await this.flushing;
    const { chunks, log } = this.deps;
    const tries = this.suspended ? 1 : FINAL_TRIES;
    for (let tried = 1; ; tried++) {
      try {
        const made = await this.read(true);
        const durationMs = made ? (this.durationMs ?? (await durationOf())) : undefined;
        if (durationMs === undefined) {
          log.warn({ code: 'RECORDING_NOT_STORED', reason: 'no audio' }, 'recording not stored');
          await chunks.discard().catch(() => undefined);
          return undefined;
        }
        await chunks.write();
        await chunks.seal();
        return { durationMs, bytes: chunks.bytes };
      } catch (err) {
        if (tried < tries) {
          await new Promise((r) => setTimeout(r, FINAL_BACKOFF_MS * tried));
          continue;
        }
        log.warn(
          { code: 'RECORDING_NOT_STORED', err: safeError(err), unwrittenBytes: chunks.unwritten },
          'recording not stored',
        );
        // chunks written and never sealed would be named by nothing (the owner sweep salvages only a lost
        // instance's) and hold the bucket's bytes until they age out
        await chunks.discard().catch(() => undefined);
        return undefined;
      }
    }
  }
}
