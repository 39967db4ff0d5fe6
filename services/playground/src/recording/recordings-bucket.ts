import { createHash, type Hash } from 'node:crypto';
import {
  jetstream,
  JetStreamApiCodes,
  jetstreamManager,
  StorageType,
  type JetStreamClient,
} from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import {
  isJetStreamError,
  nanos,
  purgeRecordingChunks,
  safeError,
  sealRecording,
  type Logger,
} from '@vab/bus';
import {
  RECORDING_CHUNK_HEADER,
  RECORDING_DURATION_HEADER,
  RECORDING_MAX_CHUNK,
  RECORDING_STARTED_AT_HEADER,
  RECORDINGS_BUCKET,
  RECORDINGS_STREAM,
  recordingChunksId,
  recordingChunksSubjectOf,
} from '@vab/contracts';
import { sweepSpools } from './spool.js';

export interface RecordingsConfig {
  /** Recordings are kept this long (the test sessions' retention). */
  RECORDINGS_MAX_AGE_MS: number;
  /** The bucket's size bound: past it a new recording is refused (the bucket's stream discards new). */
  RECORDINGS_MAX_BYTES: number;
  /** Copies of the bucket on a NATS cluster with JetStream. */
  RECORDINGS_REPLICAS: number;
  /** How long start-up waits for JetStream (a cluster elects its leader first) before it gives up. */
  EVENTS_SETUP_TIMEOUT_MS: number;
  /** How often a recording being made is written to the bucket. */
  RECORDING_FLUSH_MS: number;
  /**
   * How long a recording keeps trying a bucket that refuses its writes before it stops writing until its call
   * ends (the call's end still tries once more).
   */
  RECORDING_FLUSH_RETRY_MS: number;
}

/**
 * Where recordings are kept: a NATS JetStream Object Store bucket (chunked blobs, replicated like the events
 * stream, the engine's own age and size limits), never Redis. Made or brought to the configured limits at
 * start, idempotently across instances.
 */
export class RecordingsBucket {
  private store: Promise<ObjectStore> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly cfg: RecordingsConfig,
    private readonly log: Logger,
  ) {}

  /**
   * Start-up: the bucket exists with the configured limits (retried while JetStream comes up), and what dead
   * processes left spooled on this machine is gone.
   */
  ready(): Promise<void> {
    return Promise.all([this.opened(), sweepSpools(this.log)]).then(() => undefined);
  }

  /** How often a recording being made is written here. */
  get flushMs(): number {
    return this.cfg.RECORDING_FLUSH_MS;
  }

  /** How long a recording keeps trying this bucket while it refuses its writes. */
  get flushRetryMs(): number {
    return this.cfg.RECORDING_FLUSH_RETRY_MS;
  }

  /**
   * A recording written as it is made (decision 35): its chunks go to the bucket's own chunk subject under an
   * id known from the session (`recordingChunksId`), each as it is flushed, so a killed instance leaves them
   * stored; `seal` then writes the object's meta (what makes it an object: name, size, chunks, digest).
   */
  chunks(agentId: string, sessionId: string, startedAt: number, js?: ChunkPublisher): RecordingChunks {
    return new RecordingChunks(this.nc, agentId, sessionId, startedAt, () => this.opened(), js);
  }

  /** The bucket, set up once; a set-up that failed is tried again by the next write. */
  private opened(): Promise<ObjectStore> {
    this.store ??= this.setUp().catch((err: unknown) => {
      this.store = undefined;
      throw err;
    });
    return this.store;
  }

  private async setUp(): Promise<ObjectStore> {
    const deadline = Date.now() + this.cfg.EVENTS_SETUP_TIMEOUT_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.open();
      } catch (err) {
        if (Date.now() + 500 > deadline) throw err;
        if (attempt === 1) this.log.info({ err: safeError(err) }, 'waiting for JetStream (recordings)');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  private async open(): Promise<ObjectStore> {
    const limits = {
      max_age: nanos(this.cfg.RECORDINGS_MAX_AGE_MS),
      max_bytes: this.cfg.RECORDINGS_MAX_BYTES,
      num_replicas: this.cfg.RECORDINGS_REPLICAS,
    };
    const store = await new Objm(this.nc).create(RECORDINGS_BUCKET, {
      ttl: limits.max_age,
      max_bytes: limits.max_bytes,
      replicas: limits.num_replicas,
      storage: StorageType.File,
    });
    // create() keeps an existing bucket as it was: the limits an operator changed are applied here
    const jsm = await jetstreamManager(this.nc);
    const { config } = await jsm.streams.info(RECORDINGS_STREAM);
    if (
      config.max_age !== limits.max_age ||
      config.max_bytes !== limits.max_bytes ||
      config.num_replicas !== limits.num_replicas
    ) {
      await jsm.streams.update(RECORDINGS_STREAM, limits);
    }
    return store;
  }
}

/** The part of the JetStream client a recording's chunks are written with (a test wraps it to fail). */
export type ChunkPublisher = Pick<JetStreamClient, 'publish'>;

/** A chunk formed from the file, in the order it is to be stored, with the length of the recording at its end. */
interface Chunk {
  data: Buffer;
  durationMs: number | undefined;
}

/**
 * One recording's chunks, written in order; then sealed as the object, or discarded.
 *
 * A chunk the bucket refused stays queued, the very bytes, and is sent again by the next `write`: the recording
 * loses nothing to a NATS hiccup. Each chunk is published expecting the subject's last message to be the previous
 * chunk (`Nats-Expected-Last-Subject-Sequence`), and numbered (`Vab-Recording-Chunk`); a write whose answer was
 * lost (a timeout: it may have been stored all the same, or still be on its way) is looked up before it is sent
 * again. Only one publish of a chunk can ever be stored, so a reader never sees a chunk twice or a hole.
 */
export class RecordingChunks {
  private readonly hash: Hash = createHash('sha256');
  private size = 0;
  private count = 0;
  /** The stream sequence of the last chunk stored (0: none yet). */
  private lastSeq = 0;
  /** Chunks formed and not yet stored, oldest first. */
  private readonly queue: Chunk[] = [];
  private queued = 0;
  /** The first queued chunk was published without an answer: it may be stored. */
  private unsure = false;
  private readonly subject: string;

  constructor(
    private readonly nc: NatsConnection,
    private readonly agentId: string,
    private readonly sessionId: string,
    private readonly startedAt: number,
    private readonly ready: () => Promise<ObjectStore>,
    private readonly js: ChunkPublisher = jetstream(nc),
  ) {
    this.subject = recordingChunksSubjectOf(recordingChunksId(agentId, sessionId));
  }

  /** The bytes stored. */
  get bytes(): number {
    return this.size;
  }

  /** The bytes queued, not yet stored. */
  get unwritten(): number {
    return this.queued;
  }

  /**
   * Queues `data` (complete Ogg pages) as the next chunk(s); `durationMs` is the recording's length at its end.
   * Nothing is sent until `write`.
   */
  add(data: Buffer, durationMs: number | undefined): void {
    for (let at = 0; at < data.length; at += RECORDING_MAX_CHUNK) {
      // a copy: the caller's buffer may be reused, a queued chunk must stay the bytes it was
      const chunk = Buffer.from(data.subarray(at, at + RECORDING_MAX_CHUNK));
      this.queue.push({ data: chunk, durationMs });
      this.queued += chunk.length;
    }
  }

  /**
   * Stores the queued chunks, in order. Throws at the first the bucket does not take; it and those after it stay
   * queued for the next call.
   */
  async write(): Promise<void> {
    await this.ready();
    while (this.queue.length > 0) {
      const chunk = this.queue[0]!;
      if (this.unsure && (await this.landed(chunk))) continue;
      const h = headers();
      h.set(RECORDING_STARTED_AT_HEADER, String(this.startedAt));
      h.set(RECORDING_CHUNK_HEADER, String(this.count));
      if (chunk.durationMs !== undefined) h.set(RECORDING_DURATION_HEADER, String(chunk.durationMs));
      try {
        const ack = await this.js.publish(this.subject, chunk.data, {
          headers: h,
          expect: { lastSubjectSequence: this.lastSeq },
        });
        this.stored(chunk, ack.seq);
      } catch (err) {
        this.unsure = true;
        if (!isJetStreamError(err, JetStreamApiCodes.StreamWrongLastSequence)) throw err;
        // refused as not following the last chunk stored: an earlier publish of this very chunk was stored
        if (!(await this.landed(chunk))) throw err;
      }
    }
  }

  /**
   * Whether the queued `chunk`, published before without an answer, is the subject's last message: then it is
   * counted as stored. Throws when the subject's last message is neither it nor the chunk before it (another
   * writer's): sending it again could never be taken.
   */
  private async landed(chunk: Chunk): Promise<boolean> {
    const jsm = await jetstreamManager(this.nc);
    // from the stream's leader (not a direct get, which a replica may answer from behind)
    const last = await jsm.streams.getMessage(RECORDINGS_STREAM, { last_by_subj: this.subject });
    const lastSeq = last?.seq ?? 0;
    this.unsure = false;
    if (lastSeq === this.lastSeq) return false;
    if (
      last &&
      last.header.get(RECORDING_CHUNK_HEADER) === String(this.count) &&
      last.header.get(RECORDING_STARTED_AT_HEADER) === String(this.startedAt)
    ) {
      this.stored(chunk, last.seq);
      return true;
    }
    this.unsure = true;
    throw new Error(`the recording's chunk subject holds another writer's message (seq ${lastSeq})`);
  }

  private stored(chunk: Chunk, seq: number): void {
    this.queue.shift();
    this.queued -= chunk.data.length;
    this.hash.update(chunk.data);
    this.size += chunk.data.length;
    this.count++;
    this.lastSeq = seq;
  }

  /**
   * Writes the object's meta over the chunks stored: from now on it is the session's recording. After every
   * chunk is stored; again if it throws (the meta subject keeps only its last message).
   */
  async seal(): Promise<void> {
    if (this.queue.length > 0) throw new Error('a recording is sealed with chunks not stored');
    await sealRecording(this.js, {
      agentId: this.agentId,
      sessionId: this.sessionId,
      size: this.size,
      chunks: this.count,
      // a copy: a seal tried again digests again
      sha256: this.hash.copy().digest(),
    });
  }

  /** Removes the chunks written (a recording not kept). */
  async discard(): Promise<void> {
    this.queue.length = 0;
    this.queued = 0;
    await purgeRecordingChunks(await jetstreamManager(this.nc), this.agentId, this.sessionId);
  }
}
