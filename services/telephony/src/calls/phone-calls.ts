import type { RedisClient } from '@vab/storage';

/**
 * Which call each Twilio call is (CallSid → the agent and the call's id), for what arrives about it after the
 * voice webhook: the status callback, and whether its media stream ever attached. Kept a day at most: no call
 * lasts that long (a deploy's `maxCallDurationMs` is bounded far below), and Twilio's last status callback
 * comes within seconds of the hang-up.
 */
const TTL_SECONDS = 24 * 3600;
const key = (callSid: string) => `tp:call:${callSid}`;
const MARK_ATTACHED = `if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'attached', '1') end`;

export interface PhoneCallRef {
  agentId: string;
  callId: string;
  /** Whether its media stream attached to the call (it was ever connected). */
  attached: boolean;
}

export class PhoneCalls {
  constructor(private readonly redis: RedisClient) {}

  async answered(callSid: string, ref: { agentId: string; callId: string }): Promise<void> {
    await this.redis
      .multi()
      .hset(key(callSid), { agentId: ref.agentId, callId: ref.callId, attached: '0' })
      .expire(key(callSid), TTL_SECONDS)
      .exec();
  }

  async attached(callSid: string): Promise<void> {
    // only a call answered here (its key exists) is marked: a stray write makes no record
    await this.redis.eval(MARK_ATTACHED, 1, key(callSid));
  }

  async get(callSid: string): Promise<PhoneCallRef | undefined> {
    const h = await this.redis.hgetall(key(callSid));
    if (!h.agentId || !h.callId) return undefined;
    return { agentId: h.agentId, callId: h.callId, attached: h.attached === '1' };
  }
}
