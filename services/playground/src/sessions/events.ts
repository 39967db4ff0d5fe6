import {
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { encodeJson, isJetStreamError, JetStreamApiCodes, safeError, type Logger } from '@vab/bus';
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
  };
  try {
    await jsm.streams.info(EVENTS_STREAM);
    await jsm.streams.update(EVENTS_STREAM, config);
  } catch (err) {
    if (!isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    await jsm.streams.add({ name: EVENTS_STREAM, ...config });
    log.info({ stream: EVENTS_STREAM }, 'events stream created');
  }
}

/**
 * One session's event stream: numbers each event (1, 2, 3, …: the SSE id a client resumes from) and
 * publishes it, in order, to the subject the JetStream stream captures. A plain publish, not one that waits
 * for JetStream's acknowledgement: the stream stores it all the same, and a turn is not held up by a round
 * trip per event (measured: docs/performance.md). The last event is acknowledged (`emitLast`), so a session's
 * end is stored before its owner stops answering for it. An event that does not fit the bus (`max_payload`)
 * is dropped and logged; the session never waits for its events.
 */
export class SessionEvents {
  private next = 1;
  private dropped = 0;
  /** Errors the session saw (stats count them). */
  errors = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly agentId: string,
    private readonly sessionId: string,
    private readonly log: Logger,
  ) {}

  /** The id of the last event emitted (0 before the first). */
  get lastId(): number {
    return this.next - 1;
  }

  /** `at`: when it happened, when that is a moment stated elsewhere too (a recording's zero); else now. */
  emit(input: SessionEventInput, at = Date.now()): void {
    const id = this.next++;
    if (input.type === 'error') this.errors++;
    const event = {
      ...input,
      id,
      sessionId: this.sessionId,
      agentId: this.agentId,
      at,
    } as SessionEvent;
    try {
      this.nc.publish(eventsSubject(this.agentId, this.sessionId), encodeJson(event));
    } catch (err) {
      if (this.dropped++ === 0) {
        this.log.warn(
          { code: 'SESSION_EVENT_NOT_STORED', err: safeError(err), sessionId: this.sessionId, id },
          'session event not stored',
        );
      }
    }
  }

  /**
   * The session's last event, published with JetStream's acknowledgement: once it is stored, so is every event
   * before it (a stream stores a subject's messages in order). Its end is then on record before the owner stops
   * answering for the session.
   */
  async emitLast(input: SessionEventInput): Promise<void> {
    const id = this.next++;
    const event = { ...input, id, sessionId: this.sessionId, agentId: this.agentId, at: Date.now() };
    try {
      await jetstream(this.nc).publish(eventsSubject(this.agentId, this.sessionId), encodeJson(event), {
        timeout: LAST_EVENT_TIMEOUT_MS,
      });
    } catch (err) {
      this.log.warn(
        { code: 'SESSION_EVENT_NOT_STORED', err: safeError(err), sessionId: this.sessionId, id },
        'session event not stored',
      );
    }
  }
}

/** Bound on storing a session's last event (a stop waits for it). */
const LAST_EVENT_TIMEOUT_MS = 2_000;
