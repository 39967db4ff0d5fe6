import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { ReadableStream } from 'node:stream/web';
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { safeError, type Logger } from '@vab/bus';
import { RECORDINGS_BUCKET, recordingObject } from '@vab/contracts';
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
}

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

  /** Stores a session's recording file; resolves to the stored size and digest. */
  async put(agentId: string, sessionId: string, file: string): Promise<{ bytes: number; digest: string }> {
    const store = await (this.store ??= this.setUp());
    const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
    const info = await store.put(
      { name: recordingObject(agentId, sessionId), metadata: { agentId, sessionId } },
      body as unknown as globalThis.ReadableStream<Uint8Array>,
    );
    return { bytes: info.size, digest: info.digest };
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
