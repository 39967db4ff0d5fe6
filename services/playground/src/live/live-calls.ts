import type { BusClient } from '@vab/bus';
import {
  AppError,
  Subjects,
  type CallStarted,
  type EndedDetail,
  type EndedReason,
  type Ok,
  type StartCallRequest,
} from '@vab/contracts';
import type { HostedSessions } from '../sessions/hosted-sessions.js';
import type { VoiceSocketTransport } from '../transports/voice-socket.js';
import type { StoredCredentials } from './stored-credentials.js';

/**
 * Calls of a live deploy (issue 45), hosted exactly like a voice session (the same transport, the bus audio
 * `voice.<callId>.in|out`): admitted by the sessions service (the deploy's caps, the pinned version), run on
 * that version with the agent's stored credentials (as a start's `apiKeys`: the key rule applies), recorded
 * as the call, and ended after the deploy's `maxCallDurationMs`, or once nobody spoke for its
 * `silenceTimeoutMs`, with its `endCallMessage`.
 */
export class LiveCalls {
  constructor(
    private readonly deps: {
      bus: BusClient;
      sessions: HostedSessions;
      voice: VoiceSocketTransport;
      credentials: StoredCredentials;
      instanceId: string;
      timeoutMs: number;
    },
  ) {}

  async start(req: StartCallRequest, requestId: string): Promise<CallStarted> {
    const { bus, timeoutMs } = this.deps;
    const ask = { timeoutMs, requestId };
    const admitted = await bus.request(
      Subjects.callsAdmit,
      {
        ...(req.subdomain !== undefined ? { subdomain: req.subdomain } : {}),
        ...(req.agentId !== undefined ? { agentId: req.agentId } : {}),
        channel: req.channel,
        caller: req.caller,
        ...(req.addressKey !== undefined ? { addressKey: req.addressKey } : {}),
        ...(req.keyId !== undefined ? { keyId: req.keyId } : {}),
        ...(req.callerKey !== undefined ? { callerKey: req.callerKey } : {}),
        instanceId: this.deps.instanceId,
      },
      ask,
    );
    const { agentId, callId, version, settings } = admitted;
    try {
      const [stored, apiKeys] = await Promise.all([
        bus.request(Subjects.agentsVersionsGet, { id: agentId, version }, ask),
        this.deps.credentials.apiKeys(agentId, requestId),
      ]);
      const hosted = await this.deps.voice.host({
        agentId,
        flow: stored.flow,
        version,
        apiKeys,
        audio: req.audio,
        requestId,
        callId,
        phone: req.channel === 'phone',
      });
      hosted.call.endAfter(settings.maxCallDurationMs, settings.endCallMessage, 'max_duration');
      if (settings.silenceTimeoutMs !== null)
        hosted.call.endWhenSilent(settings.silenceTimeoutMs, settings.endCallMessage, 'silence_timeout');
      return {
        callId,
        agentId,
        deployId: admitted.deployId,
        deployNumber: admitted.deployNumber,
        version,
        audio: hosted.audio,
        connectWithinMs: hosted.connectWithinMs,
      };
    } catch (err) {
      // admitted but never hosted: the call ends here (a session that started ended it already: the first
      // end stands)
      const { endedReason, endedDetail } = whyNotHosted(err);
      await bus
        .request(
          Subjects.callsEnd,
          { agentId, callId, endedAt: Date.now(), endedReason, endedDetail, usage: [] },
          ask,
        )
        .catch(() => undefined);
      throw err;
    }
  }

  /** Idempotent: an unknown or already ended call answers ok. */
  async end(
    agentId: string,
    callId: string,
    reason: EndedReason,
    requestId: string,
    detail?: EndedDetail,
  ): Promise<Ok> {
    await this.deps.sessions.end(callId, agentId, requestId, reason, detail);
    return { ok: true };
  }
}

function whyNotHosted(err: unknown): { endedReason: EndedReason; endedDetail: EndedDetail } {
  if (err instanceof AppError && err.code === 'CAPACITY_EXHAUSTED')
    return { endedReason: 'busy', endedDetail: { kind: 'max_concurrent_calls' } };
  return {
    endedReason: 'provider_error',
    endedDetail: { kind: err instanceof AppError ? err.code.toLowerCase() : 'start' },
  };
}
