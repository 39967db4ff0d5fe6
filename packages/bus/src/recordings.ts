// A recording's chunks in the recordings bucket (decision 35) sealed as the session's object, or purged: the
// playground does both to what it recorded, the sessions service to what an instance killed while recording left.
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import {
  recordingChunksId,
  recordingChunksSubjectOf,
  recordingMeta,
  recordingMetaSubjectOf,
  RECORDINGS_STREAM,
} from '@vab/contracts';

/**
 * Writes the meta that makes a recording's stored chunks the session's object, as the Object Store's own put
 * does: the meta subject keeps only its last message, so a seal tried again replaces the one before.
 */
export async function sealRecording(
  js: Pick<JetStreamClient, 'publish'>,
  o: Parameters<typeof recordingMeta>[0],
): Promise<void> {
  const h = headers();
  h.set('Nats-Rollup', 'sub');
  await js.publish(recordingMetaSubjectOf(o.agentId, o.sessionId), JSON.stringify(recordingMeta(o)), {
    headers: h,
  });
}

/** Removes a recording's chunks: a recording not kept, or one whose chunks were never sealed. */
export async function purgeRecordingChunks(
  jsm: JetStreamManager,
  agentId: string,
  sessionId: string,
): Promise<void> {
  await jsm.streams.purge(RECORDINGS_STREAM, {
    filter: recordingChunksSubjectOf(recordingChunksId(agentId, sessionId)),
  });
}
