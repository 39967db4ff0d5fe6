import {
  AppError,
  Call,
  CallSummary,
  SessionMessage,
  type BusyKind,
  type CallCaller,
  type CallChannel,
  type DeployRecord,
  type EndCallRequest,
  type ListCallsRequest,
  type Recording,
} from '@vab/contracts';
import type { RedisClient } from '@vab/storage';

/** Keys of calls (issue 45): the agent's hash tag, so one agent's caps are counted atomically on a cluster. */
const ck = {
  calls: (agentId: string) => `ss:{${agentId}}:calls`,
  call: (agentId: string, callId: string) => `ss:{${agentId}}:call:${callId}`,
  messages: (agentId: string, callId: string) => `ss:{${agentId}}:call:${callId}:msg`,
  active: (agentId: string, deployId: string) => `ss:{${agentId}}:active:${deployId}`,
  daily: (agentId: string, deployId: string, day: string) => `ss:{${agentId}}:daily:${deployId}:${day}`,
  /** Calls one address holds at once, across agents (own slot on a cluster). */
  address: (addressKey: string) => `ss:{addr}:${addressKey}`,
};

/**
 * KEYS: active zset, daily counter. ARGV: callId, now, stale-before, maxConcurrent, dailyCap ('' = none).
 * Takes a slot of the deploy's caps, or names the cap that refuses: one script, so two instances admitting
 * at once never both take the last slot.
 */
const TAKE_SLOT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 'max_concurrent_calls' end
if ARGV[5] ~= '' and tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[5]) then
  return 'daily_call_cap'
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], 172800)
return 'ok'
`;

const utcDay = (at: number) => new Date(at).toISOString().slice(0, 10).replaceAll('-', '');

interface NewCall {
  agentId: string;
  callId: string;
  deploy: DeployRecord;
  channel: CallChannel;
  caller: CallCaller;
  addressKey?: string | undefined;
}

/** Calls, kept apart from test sessions: the record, its transcript, and the caps' counters. */
export class CallsStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly maxPerAddress: number,
  ) {
    redis.defineCommand('ssTakeCallSlot', { numberOfKeys: 2, lua: TAKE_SLOT });
  }

  /** Admits a call against the caps (the address's, the deploy's); a refusal names its cap. */
  async admit(c: NewCall): Promise<{ ok: true } | { ok: false; kind: BusyKind }> {
    const now = Date.now();
    const member = `${c.agentId}/${c.callId}`;
    // a call older than the longest a call may last is gone (its end was lost): it holds no slot any more
    const staleBefore = now - c.deploy.maxCallDurationMs - 60_000;
    if (c.addressKey && this.maxPerAddress > 0) {
      const key = ck.address(c.addressKey);
      await this.redis.zremrangebyscore(key, '-inf', `(${now - 4 * 3_600_000 - 60_000}`);
      await this.redis.zadd(key, now, member);
      await this.redis.expire(key, 5 * 3600);
      if ((await this.redis.zcard(key)) > this.maxPerAddress) {
        await this.redis.zrem(key, member);
        return { ok: false, kind: 'per_address' };
      }
    }
    const taken = (await (
      this.redis as unknown as { ssTakeCallSlot(...a: string[]): Promise<string> }
    ).ssTakeCallSlot(
      ck.active(c.agentId, c.deploy.id),
      ck.daily(c.agentId, c.deploy.id, utcDay(now)),
      c.callId,
      String(now),
      String(staleBefore),
      String(c.deploy.maxConcurrentCalls),
      c.deploy.dailyCallCap === null ? '' : String(c.deploy.dailyCallCap),
    )) as 'ok' | BusyKind;
    if (taken !== 'ok') {
      if (c.addressKey) await this.redis.zrem(ck.address(c.addressKey), member);
      return { ok: false, kind: taken };
    }
    return { ok: true };
  }

  /** Records a call: active (admitted) or ended at once (refused: `busy`, a missed call the builder sees). */
  async create(c: NewCall, busy?: BusyKind): Promise<CallSummary> {
    const now = Date.now();
    const call: CallSummary = {
      id: c.callId,
      agentId: c.agentId,
      deployId: c.deploy.id,
      deployNumber: c.deploy.deployNumber,
      version: c.deploy.version,
      channel: c.channel,
      caller: c.caller,
      status: busy ? 'ended' : 'active',
      startedAt: now,
      endedAt: busy ? now : null,
      durationMs: busy ? 0 : null,
      endedReason: busy ? 'busy' : null,
      endedDetail: busy ? { kind: busy } : null,
      transferredTo: null,
      usage: [],
      figures: null,
      recording: null,
    };
    await this.redis.set(ck.call(c.agentId, c.callId), JSON.stringify(call));
    await this.redis.set(`${ck.call(c.agentId, c.callId)}:addr`, c.addressKey ?? '');
    await this.redis.zadd(ck.calls(c.agentId), now, c.callId);
    return call;
  }

  async get(agentId: string, callId: string): Promise<CallSummary> {
    const raw = await this.redis.get(ck.call(agentId, callId));
    if (!raw) throw new AppError('NOT_FOUND', `call ${callId} not found`);
    return CallSummary.parse(JSON.parse(raw));
  }

  async getWithMessages(agentId: string, callId: string): Promise<Call> {
    const call = await this.get(agentId, callId);
    const raw = await this.redis.lrange(ck.messages(agentId, callId), 0, -1);
    const messages = raw
      .map((m) => SessionMessage.parse(JSON.parse(m)))
      .sort((a, b) => a.timestamp - b.timestamp);
    return { ...call, messages };
  }

  async append(agentId: string, callId: string, message: SessionMessage, maxMessages: number): Promise<void> {
    await this.get(agentId, callId);
    const n = await this.redis.rpush(ck.messages(agentId, callId), JSON.stringify(message));
    if (n > maxMessages) {
      await this.redis.rpop(ck.messages(agentId, callId));
      throw new AppError('LIMIT_EXCEEDED', `a call holds at most ${maxMessages} messages`);
    }
  }

  /** Ends a call (the first end stands) and gives its slots back; null when it had ended already. */
  async end(req: EndCallRequest): Promise<CallSummary | null> {
    const call = await this.get(req.agentId, req.callId);
    const addressKey = await this.redis.get(`${ck.call(req.agentId, req.callId)}:addr`);
    await this.redis.zrem(ck.active(req.agentId, call.deployId), req.callId);
    if (addressKey) await this.redis.zrem(ck.address(addressKey), `${req.agentId}/${req.callId}`);
    if (call.status === 'ended') return null;
    const endedAt = Math.max(req.endedAt, call.startedAt);
    const ended: CallSummary = {
      ...call,
      status: 'ended',
      endedAt,
      durationMs: endedAt - call.startedAt,
      endedReason: req.endedReason,
      endedDetail: req.endedDetail ?? null,
      transferredTo: req.transferredTo ?? null,
      usage: req.usage,
      figures: await this.figures(req.agentId, req.callId),
    };
    await this.redis.set(ck.call(req.agentId, req.callId), JSON.stringify(ended));
    return ended;
  }

  async setRecording(agentId: string, callId: string, recording: Recording): Promise<void> {
    const call = await this.get(agentId, callId);
    await this.redis.set(ck.call(agentId, callId), JSON.stringify({ ...call, recording }));
  }

  /** Newest first, filtered; the cursor is the last call's `<startedAt>_<id>`. */
  async list(req: ListCallsRequest): Promise<{ calls: CallSummary[]; nextCursor: string | null }> {
    const [cursorAt, cursorId] = req.cursor ? req.cursor.split('_') : [undefined, undefined];
    const max = cursorAt ?? (req.to !== undefined ? String(req.to) : '+inf');
    const min = req.from !== undefined ? String(req.from) : '-inf';
    const out: CallSummary[] = [];
    let offset = 0;
    let passedCursor = cursorId === undefined;
    for (;;) {
      const ids = await this.redis.zrevrangebyscore(ck.calls(req.agentId), max, min, 'LIMIT', offset, 200);
      offset += ids.length;
      for (const id of ids) {
        if (!passedCursor) {
          if (id === cursorId) passedCursor = true;
          continue;
        }
        const raw = await this.redis.get(ck.call(req.agentId, id));
        if (!raw) continue;
        const call = CallSummary.parse(JSON.parse(raw));
        if (req.deployId && call.deployId !== req.deployId) continue;
        if (req.channel && call.channel !== req.channel) continue;
        if (req.endedReason && call.endedReason !== req.endedReason) continue;
        out.push(call);
        if (out.length === req.limit) {
          return { calls: out, nextCursor: `${call.startedAt}_${call.id}` };
        }
      }
      if (ids.length < 200) return { calls: out, nextCursor: null };
    }
  }

  /** Erases a call and its transcript (its recording is the caller's to delete). */
  async erase(agentId: string, callId: string): Promise<CallSummary> {
    const call = await this.get(agentId, callId);
    if (call.status === 'active') throw new AppError('CONFLICT', 'the call is still going on: end it first');
    await this.redis.del(
      ck.call(agentId, callId),
      ck.messages(agentId, callId),
      `${ck.call(agentId, callId)}:addr`,
    );
    await this.redis.zrem(ck.calls(agentId), callId);
    return call;
  }

  /** Up to `limit` of the agent's calls that started before `before`, oldest first. */
  async startedBefore(agentId: string, before: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(ck.calls(agentId), '-inf', `(${before}`, 'LIMIT', 0, limit);
  }

  /** The call's turn figures (p50/p90 over the turns that called a model). */
  private async figures(agentId: string, callId: string): Promise<CallSummary['figures']> {
    const raw = await this.redis.lrange(ck.messages(agentId, callId), 0, -1);
    const metrics = raw
      .map((m) => SessionMessage.parse(JSON.parse(m)).metrics)
      .filter((m) => m !== undefined && (m.llmTtftMs !== undefined || m.e2eLatencyMs !== undefined));
    const stat = (values: number[]) => {
      if (values.length === 0) return undefined;
      const sorted = [...values].sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
      const mean = Math.round(sorted.reduce((a, b) => a + b, 0) / sorted.length);
      return { count: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), mean, max: sorted.at(-1)! };
    };
    const of = (name: 'responseMs' | 'e2eLatencyMs' | 'transcriptionDelayMs' | 'llmTtftMs' | 'ttsTtfbMs') => {
      const s = stat(metrics.map((m) => m![name]).filter((v): v is number => v !== undefined));
      return s ? { [name]: s } : {};
    };
    return {
      turns: metrics.length,
      ...of('responseMs'),
      ...of('e2eLatencyMs'),
      ...of('transcriptionDelayMs'),
      ...of('llmTtftMs'),
      ...of('ttsTtfbMs'),
    };
  }
}
