import { createHash, type Hash } from 'node:crypto';
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { safeError, type Logger } from '@vab/bus';
import {
  RECORDING_DURATION_HEADER,
  RECORDING_STARTED_AT_HEADER,
  RECORDINGS_BUCKET,
  recordingChunksId,
  recordingObject,
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
}

/** The Object Store's largest chunk (its default): a flush bigger than this goes as several. */
const MAX_CHUNK = 128 * 1024;

const nanos = (ms: number) => ms * 1_000_000;
/** The Object Store's own stream behind the bucket (`OBJ_<bucket>`), brought to the configured limits. */
const STREAM = `OBJ_${RECORDINGS_BUCKET}`;

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
    this.store ??= this.setUp();
    return Promise.all([this.store, sweepSpools(this.log)]).then(() => undefined);
  }

  /** How often a recording being made is written here. */
  get flushMs(): number {
    return this.cfg.RECORDING_FLUSH_MS;
  }

  /**
   * A recording written as it is made (decision 35): its chunks go to the bucket's own chunk subject under an
   * id known from the session (`recordingChunksId`), each as it is flushed, so a killed instance leaves them
   * stored; `seal` then writes the object's meta (what makes it an object: name, size, chunks, digest).
   */
  chunks(agentId: string, sessionId: string, startedAt: number): RecordingChunks {
    return new RecordingChunks(this.nc, agentId, sessionId, startedAt, () => (this.store ??= this.setUp()));
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
    const { config } = await jsm.streams.info(STREAM);
    if (
      config.max_age !== limits.max_age ||
      config.max_bytes !== limits.max_bytes ||
      config.num_replicas !== limits.num_replicas
    ) {
      await jsm.streams.update(STREAM, limits);
    }
    return store;
  }
}

/** One recording's chunks, written in order; then sealed as the object, or discarded. */
export class RecordingChunks {
  private readonly js;
  private readonly hash: Hash = createHash('sha256');
  private size = 0;
  private count = 0;
  private readonly id: string;

  constructor(
    private readonly nc: NatsConnection,
    private readonly agentId: string,
    private readonly sessionId: string,
    private readonly startedAt: number,
    private readonly ready: () => Promise<ObjectStore>,
  ) {
    this.js = jetstream(nc);
    this.id = recordingChunksId(agentId, sessionId);
  }

  get bytes(): number {
    return this.size;
  }

  /** Stores `data` (complete Ogg pages) as the next chunk(s); `durationMs` is the recording's length at its end. */
  async append(data: Buffer, durationMs: number | undefined): Promise<void> {
    await this.ready();
    for (let at = 0; at < data.length; at += MAX_CHUNK) {
      const chunk = data.subarray(at, at + MAX_CHUNK);
      const h = headers();
      h.set(RECORDING_STARTED_AT_HEADER, String(this.startedAt));
      if (durationMs !== undefined) h.set(RECORDING_DURATION_HEADER, String(durationMs));
      await this.js.publish(`$O.${RECORDINGS_BUCKET}.C.${this.id}`, chunk, { headers: h });
      this.hash.update(chunk);
      this.size += chunk.length;
      this.count++;
    }
  }

  /** Writes the object's meta over the chunks stored: from now on it is the session's recording. */
  async seal(): Promise<void> {
    const name = recordingObject(this.agentId, this.sessionId);
    const meta = {
      name,
      options: { max_chunk_size: MAX_CHUNK },
      metadata: { agentId: this.agentId, sessionId: this.sessionId },
      bucket: RECORDINGS_BUCKET,
      nuid: this.id,
      size: this.size,
      chunks: this.count,
      mtime: new Date().toISOString(),
      digest: `SHA-256=${padded(this.hash.digest('base64url'))}`,
      deleted: false,
    };
    const h = headers();
    // as the Object Store's own put: the meta subject keeps only its last message
    h.set('Nats-Rollup', 'sub');
    await this.js.publish(
      `$O.${RECORDINGS_BUCKET}.M.${padded(Buffer.from(name).toString('base64url'))}`,
      JSON.stringify(meta),
      {
        headers: h,
      },
    );
  }

  /** Removes the chunks written (a recording not kept). */
  async discard(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    await jsm.streams.purge(STREAM, { filter: `$O.${RECORDINGS_BUCKET}.C.${this.id}` });
  }
}

/** The Object Store's names and digests are base64url with its padding. */
function padded(b64url: string): string {
  return b64url + '='.repeat((4 - (b64url.length % 4)) % 4);
}
