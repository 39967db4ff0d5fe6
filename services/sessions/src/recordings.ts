import { createHash } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  isJetStreamError,
  JetStreamApiCodes,
  purgeRecordingChunks,
  safeError,
  sealRecording,
  type Logger,
} from '@vab/bus';
import {
  RECORDING_DURATION_HEADER,
  RECORDING_STARTED_AT_HEADER,
  RECORDINGS_BUCKET,
  RECORDINGS_STREAM,
  recordingChunksId,
  recordingChunksSubjectOf,
  recordingObject,
  type Recording,
} from '@vab/contracts';

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
        const { success } = await store.delete(recordingObject(agentId, sessionId));
        if (success) removed++;
        // no object: chunks never sealed (an instance killed while recording, the session gone before the sweep)
        else await purgeRecordingChunks(await jetstreamManager(this.nc), agentId, sessionId);
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

  /**
   * What an instance killed while recording left (decision 35): the chunks it wrote as it recorded, under the
   * id the session names, made the session's object (its meta written over them, as the Object Store's put
   * does) and described as a `Recording`. Undefined when it left none. Never throws (logged).
   */
  async salvage(agentId: string, sessionId: string): Promise<Recording | undefined> {
    const subject = recordingChunksSubjectOf(recordingChunksId(agentId, sessionId));
    try {
      const jsm = await jetstreamManager(this.nc);
      const last = await jsm.streams
        .getMessage(RECORDINGS_STREAM, { last_by_subj: subject })
        .catch(() => null);
      if (!last) return undefined;
      const startedAt = Number(last.header.get(RECORDING_STARTED_AT_HEADER));
      const durationMs = Number(last.header.get(RECORDING_DURATION_HEADER));
      if (!Number.isFinite(startedAt) || !(durationMs > 0)) return undefined;
      const hash = createHash('sha256');
      let size = 0;
      let chunks = 0;
      // one direct get at a time (a server before 2.10 filters a consumer on one subject only as filter_subject,
      // which the ordered consumer no longer sends); a sweep salvages rarely, a recording has a few hundred
      for (let seq = 1; seq <= last.seq;) {
        const m = await jsm.direct.getMessage(RECORDINGS_STREAM, { seq, next_by_subj: subject });
        if (!m) throw new Error('a recording chunk did not come');
        hash.update(m.data);
        size += m.data.length;
        chunks++;
        seq = m.seq + 1;
      }
      await sealRecording(jetstream(this.nc), { agentId, sessionId, size, chunks, sha256: hash.digest() });
      return { durationMs, bytes: size, startedAt };
    } catch (err) {
      this.log.warn(
        { code: 'RECORDING_NOT_STORED', err: safeError(err), agentId, sessionId },
        'partial recording not kept',
      );
      return undefined;
    }
  }
}
