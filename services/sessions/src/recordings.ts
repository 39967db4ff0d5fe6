import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, safeError, type Logger } from '@vab/bus';
import { RECORDINGS_BUCKET, recordingObject } from '@vab/contracts';

/**
 * Removes recordings with their sessions: the recordings bucket (NATS Object Store, written by the playground)
 * also ages them out on its own (RECORDINGS_MAX_AGE_MS), which is what catches one this misses.
 */
export class Recordings {
  private bucket: Promise<ObjectStore> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
  ) {}

  /** Deletes the recordings of these sessions of an agent; how many went. Never throws. */
  async remove(agentId: string, sessionIds: string[]): Promise<number> {
    if (sessionIds.length === 0) return 0;
    let store: ObjectStore;
    try {
      // unchecked: a bucket not made yet answers StreamNotFound on the delete itself
      store = await (this.bucket ??= new Objm(this.nc).open(RECORDINGS_BUCKET, false));
    } catch (err) {
      this.bucket = undefined;
      this.log.warn(
        { code: 'RECORDING_NOT_REMOVED', err: safeError(err) },
        'recordings bucket not reachable',
      );
      return 0;
    }
    let removed = 0;
    for (const sessionId of sessionIds) {
      try {
        await store.delete(recordingObject(agentId, sessionId));
        removed++;
      } catch (err) {
        // no bucket: no recording was ever made (or recordings are off)
        if (isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) return removed;
        this.log.warn(
          { code: 'RECORDING_NOT_REMOVED', err: safeError(err), agentId, sessionId },
          'recording not removed; the bucket will age it out',
        );
      }
    }
    return removed;
  }
}
