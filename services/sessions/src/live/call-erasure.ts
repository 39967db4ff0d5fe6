import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, safeError, type Logger } from '@vab/bus';
import { EVENTS_STREAM, eventsSubject } from '@vab/contracts';
import type { Recordings } from '../recordings.js';

/**
 * What a call leaves outside Redis, removed with it (an erasure, the retention sweep): its recording (the
 * recordings bucket) and its live events (the stream SESSION_EVENTS, whose transcript events hold what was
 * said). Never throws: what it cannot remove now, the stream's and the bucket's own age limits remove later.
 */
export class CallErasure {
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly recordings: Recordings,
    private readonly log: Logger,
  ) {}

  async remove(agentId: string, callIds: string[], recorded: string[]): Promise<void> {
    await this.recordings.remove(agentId, recorded);
    for (const callId of callIds) await this.purgeEvents(agentId, callId);
  }

  private async purgeEvents(agentId: string, callId: string): Promise<void> {
    try {
      const jsm = await (this.jsm ??= jetstreamManager(this.nc).catch((err: unknown) => {
        this.jsm = undefined;
        throw err;
      }));
      await jsm.streams.purge(EVENTS_STREAM, { filter: eventsSubject(agentId, callId) });
    } catch (err) {
      // no stream: no event was ever kept here
      if (isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) return;
      this.log.warn(
        { code: 'CALL_EVENTS_NOT_REMOVED', err: safeError(err), agentId, callId },
        "call's events not removed; the stream will age them out",
      );
    }
  }
}
