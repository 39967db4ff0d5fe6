import {
  DiscardPolicy,
  jetstreamManager,
  StorageType,
  type JetStreamClient,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { encodeJson, safeError, type Logger } from '@vab/bus';
import {
  EVENTS_STREAM,
  EVENTS_SUBJECT_PREFIX,
  eventsSubject,
  type SessionEvent,
  type SessionEventInput,
} from '@vab/contracts';

export interface EventsConfig {
  /** Events are kept this long (the test sessions' retention, so a finished session's stream can be read). */
  EVENTS_MAX_AGE_MS: number;
  /** The whole stream's size bound: the oldest events go first past it. */
  EVENTS_MAX_BYTES: number;
  /** Copies of the stream on a NATS cluster with JetStream. */
  EVENTS_REPLICAS: number;
  /** Publishes of one session awaiting JetStream's ack; past it events are dropped (and logged), never waited for. */
  EVENTS_MAX_IN_FLIGHT: number;
  /** How long start-up waits for JetStream (a cluster elects its leader first) before it gives up. */
  EVENTS_SETUP_TIMEOUT_MS: number;
}

const nanos = (ms: number) => ms * 1_000_000;

/**
 * The stream that keeps every session's events, created or brought to the configured limits at start: the
 * engine's own retention (age, size) instead of a sweep of ours. Idempotent across instances.
 */
export async function ensureEventsStream(nc: NatsConnection, cfg: EventsConfig, log: Logger): Promise<void> {
  const deadline = Date.now() + cfg.EVENTS_SETUP_TIMEOUT_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await putEventsStream(nc, cfg, log);
      return;
    } catch (err) {
      // a JetStream cluster that has just started answers "temporarily unavailable" or not at all
      if (Date.now() + 500 > deadline) throw err;
      if (attempt === 1) log.info({ err: safeError(err) }, 'waiting for JetStream');
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

async function putEventsStream(nc: NatsConnection, cfg: EventsConfig, log: Logger): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const config: Partial<StreamConfig> = {
    subjects: [`${EVENTS_SUBJECT_PREFIX}.>`],
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: nanos(cfg.EVENTS_MAX_AGE_MS),
    max_bytes: cfg.EVENTS_MAX_BYTES,
    num_replicas: cfg.EVENTS_REPLICAS,
    // a publish retried after a lost ack is stored once (each event's msgID is its session and id)
    duplicate_window: nanos(120_000),
  };
  try {
    await jsm.streams.info(EVENTS_STREAM);
    await jsm.streams.update(EVENTS_STREAM, config);
  } catch (err) {
    if ((err as { name?: string }).name !== 'StreamNotFoundError') throw err;
    await jsm.streams.add({ name: EVENTS_STREAM, ...config });
    log.info({ stream: EVENTS_STREAM }, 'events stream created');
  }
}

/**
 * One session's event stream: numbers each event (1, 2, 3, …: the SSE id a client resumes from) and
 * publishes it to JetStream without waiting, in order. The session never waits for it: past
 * `maxInFlight` unacknowledged publishes an event is dropped and logged.
 */
export class SessionEvents {
  private next = 1;
  private readonly inFlight = new Set<Promise<unknown>>();
  private dropped = 0;
  /** Errors the session saw (stats count them). */
  errors = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly agentId: string,
    private readonly sessionId: string,
    private readonly log: Logger,
    private readonly maxInFlight: number,
  ) {}

  /** The id of the last event emitted (0 before the first). */
  get lastId(): number {
    return this.next - 1;
  }

  emit(input: SessionEventInput): void {
    const id = this.next++;
    if (input.type === 'error') this.errors++;
    if (this.inFlight.size >= this.maxInFlight) {
      if (this.dropped++ === 0) {
        this.log.warn({ sessionId: this.sessionId, maxInFlight: this.maxInFlight }, 'session events dropped');
      }
      return;
    }
    const event = {
      ...input,
      id,
      sessionId: this.sessionId,
      agentId: this.agentId,
      at: Date.now(),
    } as SessionEvent;
    const sent = this.js
      .publish(eventsSubject(this.agentId, this.sessionId), encodeJson(event), {
        msgID: `${this.sessionId}:${id}`,
      })
      .catch((err: unknown) =>
        this.log.warn({ err: safeError(err), sessionId: this.sessionId, id }, 'session event not stored'),
      )
      .finally(() => this.inFlight.delete(sent));
    this.inFlight.add(sent);
  }

  /** Every event emitted so far is stored (or has failed): the end of a session waits for its last events. */
  async flush(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }
}
