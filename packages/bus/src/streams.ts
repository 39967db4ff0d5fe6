// JetStream streams that more than one service makes when missing (whichever starts first): each declared once
// here, with the one way to make a stream that may exist already.
import {
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { ANALYSIS_STREAM, ANALYSIS_SUBJECTS } from '@vab/contracts';
import { isJetStreamError } from './kv.js';

/** JetStream counts durations in nanoseconds. */
export const nanos = (ms: number): number => ms * 1_000_000;

/**
 * The work queue of call analyses (docs/decisions/0034-post-call-analysis.md), as both the sessions service
 * (which queues) and the playground (which works it) make it: WorkQueue retention (a job is gone once a worker
 * acknowledges it), a job waits at most a week, a retried publish (same msgID) within two minutes is stored once.
 */
export const ANALYSIS_STREAM_CONFIG = {
  name: ANALYSIS_STREAM,
  subjects: [ANALYSIS_SUBJECTS],
  retention: RetentionPolicy.Workqueue,
  storage: StorageType.File,
  max_age: nanos(7 * 86_400_000),
  duplicate_window: nanos(120_000),
} satisfies Partial<StreamConfig> & { name: string };

/**
 * Makes the stream when it does not exist; one that exists is left as it is (its settings are its maker's).
 * Another process making it at the same moment is not an error.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
): Promise<void> {
  try {
    await jsm.streams.info(config.name);
  } catch (err) {
    if (!isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    await jsm.streams.add(config).catch((e: unknown) => {
      // another process made it meanwhile
      if (!(e instanceof JetStreamApiError)) throw e;
    });
  }
}
