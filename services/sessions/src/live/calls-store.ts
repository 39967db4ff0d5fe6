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
  type StoreAnalysisRequest,
} from '@vab/contracts';
import { storage, type RedisClient } from '@vab/storage';
import { keys } from '../redis-keys.js';

/** Keys of calls (issue 45): the agent's hash tag, so one agent's caps are counted atomically on a cluster. */
const ck = {
  calls: (agentId: string) => `ss:{${agentId}}:calls`,
  call: (agentId: string, callId: string) => `ss:{${agentId}}:call:${callId}`,
  messages: (agentId: string, callId: string) => `ss:{${agentId}}:call:${callId}:msg`,
  /** Its analysis (issue 47), apart from the record so that storing it never races the call's own writes. */
  analysis: (agentId: string, callId: string) => `ss:{${agentId}}:call:${callId}:analysis`,
  /** `<requestedAt>:<jobId>` of the job whose analysis is stored. */
  analysisJob: (agentId: string, callId: string) => `ss:{${agentId}}:call:${callId}:analysis-job`,
  active: (agentId: string, deployId: string) => `ss:{${agentId}}:active:${deployId}`,
  daily: (agentId: string, deployId: string, day: string) => `ss:{${agentId}}:daily:${deployId}:${day}`,
  /**
   * Every active call, across agents (`<agentId>/<callId>`, scored by its start): the owner sweep asks their
   * instances whether they still hold them. The sweep's own slot on a cluster.
   */
  open: 'ss:{open}:calls',
  /** Calls one address holds at once, across agents (own slot on a cluster). */
  address: (addressKey: string) => `ss:{addr}:${addressKey}`,
  /** A refusal of this caller at this cap was recorded within the window (`REFUSALS_RECORDED_EVERY_MS`). */
  refused: (agentId: string, kind: BusyKind, callerKey: string) =>
    `ss:{${agentId}}:refused:${kind}:${callerKey}`,
};

/**
 * One refusal of a caller at one cap is recorded per minute: a caller retrying a full deploy (or a script
 * from one address) is one missed call a minute to the builder, not a record and a `call.ended` delivery per
 * try, kept for the retention (each try is still refused, and logged).
 */
export const REFUSALS_RECORDED_EVERY_MS = 60_000;

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

/**
 * Lua: the canary judge's figures (decision 0035; redis-keys.ts canaryCounts) of the agent's running canary
 * as they stand for one call after its record, its analysis or its erasure changed: the call is taken out of
 * them, then counted again from what is stored of it now, exactly as the judge counted the calls it listed —
 * started since the canary went canary, on the canary's or the live deploy's side; `passed`/`failed` by its
 * analysis' `success` (null or absent: not judged); `timed` once ended with its own p50 of the caller's wait.
 * A call erased (or past its retention) is in none of them, as it is in no list. Idempotent, so a retry or the
 * upgrade's seeding (which recounts every call since the canary began) never counts a call twice. Figures that
 * are not the running canary's (an earlier canary's left behind, or none) are left alone.
 * recount(meta key, call key, analysis key, callId, at): the figures' seven keys are KEYS[at..at+6]
 * (redis-keys.ts canaryCountKeys), so a script names every key it touches.
 */
const RECOUNT = `
local function recount(meta, call, analysis, callId, at)
  local canary = redis.call('HGET', meta, 'canary')
  if not canary then return end
  local counts = KEYS[at]
  if redis.call('HGET', counts, 'canary') ~= canary then return end
  local sides = {
    c = { pass = KEYS[at + 1], fail = KEYS[at + 2], timed = KEYS[at + 3] },
    l = { pass = KEYS[at + 4], fail = KEYS[at + 5], timed = KEYS[at + 6] },
  }
  for _, s in pairs(sides) do
    redis.call('SREM', s.pass, callId)
    redis.call('SREM', s.fail, callId)
    redis.call('ZREM', s.timed, callId)
  end
  local since = redis.call('HGET', counts, 'since')
  if not since then return end
  local raw = redis.call('GET', call)
  if not raw then return end
  local c = cjson.decode(raw)
  if tonumber(c.startedAt) < tonumber(since) then return end
  local side
  if c.deployId == canary then side = sides.c
  elseif c.deployId == redis.call('HGET', counts, 'live') then side = sides.l
  else return end
  local a = redis.call('GET', analysis)
  if a then
    local success = cjson.decode(a).success
    if success == true then redis.call('SADD', side.pass, callId)
    elseif success == false then redis.call('SADD', side.fail, callId) end
  end
  local f = c.figures
  if c.status == 'ended' and type(f) == 'table' and type(f.responseMs) == 'table'
    and type(f.responseMs.p50) == 'number' then
    redis.call('ZADD', side.timed, f.responseMs.p50, callId)
  end
end
`;

/**
 * KEYS: call, analysis, analysis-job, deploy meta, the canary figures' seven keys. ARGV: analysis JSON,
 * requestedAt, jobId, callId. Stores a job's analysis unless the call is gone, this job's result is stored
 * already (a redelivered job), or a later job's is; the canary's figures follow it in the same script.
 */
const STORE_ANALYSIS = `
${RECOUNT}
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
local last = redis.call('GET', KEYS[3])
if last then
  local sep = string.find(last, ':', 1, true)
  local at = tonumber(string.sub(last, 1, sep - 1))
  if string.sub(last, sep + 1) == ARGV[3] or at > tonumber(ARGV[2]) then return 'kept' end
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], ARGV[2] .. ':' .. ARGV[3])
recount(KEYS[4], KEYS[1], KEYS[2], ARGV[4], 5)
return 'stored'
`;

/**
 * KEYS: call, analysis, deploy meta, the canary figures' seven keys. ARGV: the ended record's JSON, callId, the
 * record it was made from. Written only over that record ('changed' else: a recording stored or the call
 * erased meanwhile).
 */
const END_CALL = `
${RECOUNT}
if redis.call('GET', KEYS[1]) ~= ARGV[3] then return 'changed' end
redis.call('SET', KEYS[1], ARGV[1])
recount(KEYS[3], KEYS[1], KEYS[2], ARGV[2], 4)
return 'ok'
`;

/** KEYS: call. ARGV: the record read, the record to write. Compare and set: 1 when written, 0 when it moved. */
const REPLACE_CALL = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`;

/** Times a read-modify-write of a call record is tried again when another write came between. */
const WRITE_ATTEMPTS = 5;

/**
 * KEYS: call, analysis, deploy meta, the agent's calls index, the canary figures' seven keys, then the rest of
 * the call's keys to delete. ARGV: callId. The call goes, and with it its place in the canary's figures.
 * Returns the record and its analysis as they were deleted (the caller removes the recording this record
 * names: read here, not before, so a recording stored meanwhile is never left behind), 'active' for a call
 * still going on (kept), or nil when there is none.
 */
const ERASE_CALL = `
${RECOUNT}
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
if cjson.decode(raw).status == 'active' then return 'active' end
local analysis = redis.call('GET', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2])
for i = 12, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('ZREM', KEYS[4], ARGV[1])
recount(KEYS[3], KEYS[1], KEYS[2], ARGV[1], 5)
return { raw, analysis or false }
`;

/**
 * KEYS: the canary figures' seven keys (redis-keys.ts canaryCountKeys). The figures at one instant: `since`,
 * `seeded`, `live`, `canary` (whose they are), then per side (canary, live) passed, failed, timed and the
 * median's p50 (the ⌈n/2⌉-th smallest, as the judge sorted them; false when none).
 */
const FIGURES = `
local h = redis.call('HMGET', KEYS[1], 'since', 'seeded', 'live', 'canary')
local out = { h[1] or false, h[2] or false, h[3] or false, h[4] or false }
for _, at in ipairs({ 2, 5 }) do
  local timed = redis.call('ZCARD', KEYS[at + 2])
  local median = false
  if timed > 0 then
    local rank = math.ceil(0.5 * timed) - 1
    median = redis.call('ZRANGE', KEYS[at + 2], rank, rank, 'WITHSCORES')[2]
  end
  table.insert(out, redis.call('SCARD', KEYS[at]))
  table.insert(out, redis.call('SCARD', KEYS[at + 1]))
  table.insert(out, timed)
  table.insert(out, median)
end
return out
`;

/**
 * KEYS: call, analysis, deploy meta, the canary figures' seven keys. ARGV: callId. The upgrade's seeding, one
 * call.
 */
const RECOUNT_CALL = `
${RECOUNT}
recount(KEYS[3], KEYS[1], KEYS[2], ARGV[1], 4)
return 'ok'
`;

/** A stored call record with its analysis (stored apart: analyses come after the call, and again). */
function callOf(raw: string, analysis: string | null | undefined): CallSummary {
  return CallSummary.parse({ ...JSON.parse(raw), analysis: analysis ? JSON.parse(analysis) : null });
}

/** One side's figures as the judge reads them (live/canary.ts). */
export interface CountedSide {
  judged: number;
  passed: number;
  timed: number;
  /** The median (the ⌈n/2⌉-th smallest) of the timed calls' own p50s, or null. */
  responseP50Ms: number | null;
}

/** Whether the call's analysis gave the criterion that verdict. */
function hasVerdict(call: CallSummary, c: { name: string; verdict: string }): boolean {
  const criteria = call.analysis && 'criteria' in call.analysis ? call.analysis.criteria : [];
  return criteria.some((v) => v.name === c.name && v.verdict === c.verdict);
}

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
    redis.defineCommand('ssStoreCallAnalysis', { numberOfKeys: 11, lua: STORE_ANALYSIS });
    redis.defineCommand('ssEndCall', { numberOfKeys: 10, lua: END_CALL });
    redis.defineCommand('ssReplaceCall', { numberOfKeys: 1, lua: REPLACE_CALL });
    redis.defineCommand('ssEraseCall', { lua: ERASE_CALL });
    redis.defineCommand('ssCanaryFigures', { numberOfKeys: 7, lua: FIGURES });
    redis.defineCommand('ssRecountCall', { numberOfKeys: 10, lua: RECOUNT_CALL });
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

  /**
   * Whether this refusal is to be recorded: the caller's first at this cap within `REFUSALS_RECORDED_EVERY_MS`
   * (a caller without a key — a withheld number — always is).
   */
  async recordsRefusal(agentId: string, kind: BusyKind, callerKey: string | undefined): Promise<boolean> {
    if (callerKey === undefined) return true;
    const key = ck.refused(agentId, kind, callerKey);
    return (await storage(() => this.redis.set(key, '1', 'PX', REFUSALS_RECORDED_EVERY_MS, 'NX'))) === 'OK';
  }

  /** A refusal `recordsRefusal` allowed was not recorded (its write failed): the next one is. */
  async forgetRefusal(agentId: string, kind: BusyKind, callerKey: string | undefined): Promise<void> {
    if (callerKey !== undefined) await storage(() => this.redis.del(ck.refused(agentId, kind, callerKey)));
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
      analysis: null,
    };
    await this.redis.set(ck.call(c.agentId, c.callId), JSON.stringify(call));
    await this.redis.set(`${ck.call(c.agentId, c.callId)}:addr`, c.addressKey ?? '');
    await this.redis.zadd(ck.calls(c.agentId), now, c.callId);
    if (!busy) await this.redis.zadd(ck.open, now, `${c.agentId}/${c.callId}`);
    return call;
  }

  async get(agentId: string, callId: string): Promise<CallSummary> {
    const call = await this.read(agentId, callId);
    if (!call) throw new AppError('NOT_FOUND', `call ${callId} not found`);
    return call;
  }

  /** The record with its analysis; null when there is none. */
  private async read(agentId: string, callId: string): Promise<CallSummary | null> {
    return (await this.readStored(agentId, callId))?.call ?? null;
  }

  /** The record with its analysis, and the stored text it was read from (what a later write compares). */
  private async readStored(
    agentId: string,
    callId: string,
  ): Promise<{ call: CallSummary; raw: string } | null> {
    const [raw, analysis] = await this.redis.mget(ck.call(agentId, callId), ck.analysis(agentId, callId));
    if (!raw) return null;
    return { call: callOf(raw, analysis), raw };
  }

  /** Stores a job's analysis (at most one result per job; an older job never replaces a newer's). */
  async setAnalysis(req: StoreAnalysisRequest): Promise<'stored' | 'kept' | 'gone'> {
    return (await (
      this.redis as unknown as { ssStoreCallAnalysis(...a: string[]): Promise<string> }
    ).ssStoreCallAnalysis(
      ck.call(req.agentId, req.callId),
      ck.analysis(req.agentId, req.callId),
      ck.analysisJob(req.agentId, req.callId),
      keys.deployMeta(req.agentId),
      ...keys.canaryCountKeys(req.agentId),
      JSON.stringify(req.analysis),
      String(req.requestedAt),
      req.jobId,
      req.callId,
    )) as 'stored' | 'kept' | 'gone';
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
    const addressKey = await this.redis.get(`${ck.call(req.agentId, req.callId)}:addr`);
    const first = await this.readStored(req.agentId, req.callId);
    if (!first) throw new AppError('NOT_FOUND', `call ${req.callId} not found`);
    // its slots are given back once it is ended (or found ended): a write that gives up leaves the call
    // active and still in the open index, where the owner sweep finds it again. Given back at best: the call
    // is ended by then, and a failure here must not fail the end (its caller would retry, find it ended and
    // announce nothing); the open index's entry goes last, so the owner sweep's next end gives back the rest
    const release = async () => {
      try {
        await this.redis.zrem(ck.active(req.agentId, first.call.deployId), req.callId);
        if (addressKey) await this.redis.zrem(ck.address(addressKey), `${req.agentId}/${req.callId}`);
        await this.redis.zrem(ck.open, `${req.agentId}/${req.callId}`);
      } catch {
        // left for the owner sweep (above)
      }
    };
    const figures = await this.figures(req.agentId, req.callId);
    // the record is replaced whole: written only over the one it was made from, read again when a
    // recording's store (or an erasure) came between, so neither is undone
    let stored: { call: CallSummary; raw: string } | null = first;
    for (let attempt = 0; stored && attempt < WRITE_ATTEMPTS; attempt++) {
      const { call, raw } = stored;
      if (call.status === 'ended') {
        await release();
        return null;
      }
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
        figures,
      };
      const written = await this.scripts.ssEndCall(
        ck.call(req.agentId, req.callId),
        ck.analysis(req.agentId, req.callId),
        keys.deployMeta(req.agentId),
        ...keys.canaryCountKeys(req.agentId),
        JSON.stringify(ended),
        req.callId,
        raw,
      );
      if (written === 'ok') {
        await release();
        return ended;
      }
      stored = await this.readStored(req.agentId, req.callId);
    }
    if (!stored) throw new AppError('NOT_FOUND', `call ${req.callId} not found`);
    throw new AppError('CONFLICT', `call ${req.callId} kept changing while it was ended; try again`);
  }

  /** Active calls started before `before`, the oldest first (the owner sweep's). */
  async openCallsBefore(before: number, batch: number): Promise<{ agentId: string; callId: string }[]> {
    const members = await this.redis.zrangebyscore(ck.open, '-inf', before, 'LIMIT', 0, batch);
    return members.flatMap((m) => {
      const [agentId, callId] = m.split('/');
      return agentId && callId ? [{ agentId, callId }] : [];
    });
  }

  /** A call no longer to sweep (erased, or its record gone). */
  async forgetOpenCall(agentId: string, callId: string): Promise<void> {
    await this.redis.zrem(ck.open, `${agentId}/${callId}`);
  }

  async setRecording(agentId: string, callId: string, recording: Recording): Promise<void> {
    // compare and set, as the end's write: the call may end (or be erased) between the read and the write
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const stored = await this.readStored(agentId, callId);
      if (!stored) throw new AppError('NOT_FOUND', `call ${callId} not found`);
      const next = JSON.stringify({ ...JSON.parse(stored.raw), recording });
      if ((await this.scripts.ssReplaceCall(ck.call(agentId, callId), stored.raw, next)) === 1) return;
    }
    throw new AppError('CONFLICT', `call ${callId} kept changing while its recording was stored; try again`);
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
        const call = await this.read(req.agentId, id);
        if (!call) continue;
        if (
          req.success !== undefined &&
          (call.analysis as { success?: unknown } | null)?.success !== req.success
        )
          continue;
        if (req.criterion && !hasVerdict(call, req.criterion)) continue;
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

  /**
   * Erases a call and its transcript; the record as it was deleted (its recording is the caller's to delete:
   * one stored up to the erasure is named here).
   */
  async erase(agentId: string, callId: string): Promise<CallSummary> {
    const erased = await this.scripts.ssEraseCall(
      14,
      ck.call(agentId, callId),
      ck.analysis(agentId, callId),
      keys.deployMeta(agentId),
      ck.calls(agentId),
      ...keys.canaryCountKeys(agentId),
      ck.messages(agentId, callId),
      `${ck.call(agentId, callId)}:addr`,
      ck.analysisJob(agentId, callId),
      callId,
    );
    if (erased === null) throw new AppError('NOT_FOUND', `call ${callId} not found`);
    if (erased === 'active') throw new AppError('CONFLICT', 'the call is still going on: end it first');
    const [raw, analysis] = erased;
    return callOf(raw, analysis);
  }

  private get scripts() {
    return this.redis as unknown as {
      ssEndCall(...a: string[]): Promise<string>;
      ssReplaceCall(...a: string[]): Promise<number>;
      ssEraseCall(numKeys: number, ...a: string[]): Promise<[string, string | null] | 'active' | null>;
      ssRecountCall(...a: string[]): Promise<string>;
      ssCanaryFigures(...counts: string[]): Promise<(string | number | null)[]>;
    };
  }

  /**
   * The judge's figures of the agent's running canary `canaryId` (decision 0035) for its side and the live
   * deploy's, kept as their calls change (RECOUNT above): one script, a few reads whatever the number of
   * calls (the medians by rank, O(log n)), all at one instant. Null when there are none to trust: the canary
   * went canary before this version counted (the upgrade's recount has not counted its calls yet), or it
   * has ended.
   */
  async canaryFigures(
    agentId: string,
    canaryId: string,
  ): Promise<{ liveId: string; canary: CountedSide; live: CountedSide } | null> {
    const f = await storage(() => this.scripts.ssCanaryFigures(...keys.canaryCountKeys(agentId)));
    const [since, seeded, liveId, of] = f;
    if (!since || !seeded || typeof liveId !== 'string' || of !== canaryId) return null;
    const side = (at: number): CountedSide => {
      const [pass, fail, timed, median] = f.slice(at, at + 4);
      return {
        judged: Number(pass) + Number(fail),
        passed: Number(pass),
        timed: Number(timed),
        responseP50Ms: median === null || median === undefined ? null : Number(median),
      };
    };
    return { liveId, canary: side(4), live: side(8) };
  }

  /**
   * The upgrade's recount of a running canary's figures (live/deploy-backfill.ts): a canary that went canary
   * before calls were counted is counted from its start (`since`, its `liveAt`) as every instance now counts,
   * then every call of the agent since then is recounted, `batch` at a time (so are calls an instance of the
   * previous version closed without counting, during a rolling upgrade), and only then are the figures of a
   * canary that had none trusted (`seeded`). A call changed meanwhile is recounted by its own change too: each
   * recount sets the call's place from what is stored of it, so the two never add up twice. False when the
   * canary is no longer the agent's running one.
   */
  async seedCanaryFigures(
    agentId: string,
    canary: { id: string; since: number; liveId: string },
    batch = 200,
  ): Promise<boolean> {
    const counts = keys.canaryCountKeys(agentId);
    // figures of another canary (an earlier one's left behind) are replaced; this one's are kept
    const started = await storage(() =>
      this.redis.eval(
        `if redis.call('HGET', KEYS[1], 'canary') ~= ARGV[1] then return 0 end
         if redis.call('HGET', KEYS[2], 'canary') ~= ARGV[1] or redis.call('HEXISTS', KEYS[2], 'since') == 0 then
           redis.call('DEL', unpack(KEYS, 2, 8))
           redis.call('HSET', KEYS[2], 'since', ARGV[2], 'canary', ARGV[1], 'live', ARGV[3])
         end
         return 1`,
        8,
        keys.deployMeta(agentId),
        ...counts,
        canary.id,
        String(canary.since),
        canary.liveId,
      ),
    );
    if (started !== 1) return false;
    // by start (the index's score), not by rank: an erasure meanwhile shifts the ranks, never the scores; the
    // calls at the page's last start are asked again and those recounted already skipped
    let min = String(canary.since);
    let atMin = new Set<string>();
    for (;;) {
      const limit = batch + atMin.size;
      const flat = await storage(() =>
        this.redis.zrangebyscore(ck.calls(agentId), min, '+inf', 'WITHSCORES', 'LIMIT', 0, limit),
      );
      const page: { id: string; at: string }[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) page.push({ id: flat[i]!, at: flat[i + 1]! });
      const fresh = page.filter((c) => !atMin.has(c.id));
      if (fresh.length > 0) {
        const pipe = this.redis.pipeline() as unknown as {
          ssRecountCall(...a: string[]): unknown;
          exec(): Promise<[Error | null, unknown][] | null>;
        };
        for (const { id } of fresh) {
          pipe.ssRecountCall(
            ck.call(agentId, id),
            ck.analysis(agentId, id),
            keys.deployMeta(agentId),
            ...counts,
            id,
          );
        }
        for (const [err] of (await storage(() => pipe.exec())) ?? []) if (err) throw err;
      }
      if (page.length < limit) break;
      const last = page.at(-1)!.at;
      if (last !== min) atMin = new Set(page.filter((c) => c.at === last).map((c) => c.id));
      else for (const c of fresh) atMin.add(c.id);
      min = last;
    }
    const done = await storage(() =>
      this.redis.eval(
        `if redis.call('HGET', KEYS[1], 'canary') ~= ARGV[1] then return 0 end
         if redis.call('HEXISTS', KEYS[1], 'since') == 0 then return 0 end
         redis.call('HSET', KEYS[1], 'seeded', '1')
         return 1`,
        1,
        counts[0]!,
        canary.id,
      ),
    );
    return done === 1;
  }

  /** Each turn's `responseMs` of a call (deploy stats pool them across calls). */
  async responseTimes(agentId: string, callId: string): Promise<number[]> {
    const raw = await this.redis.lrange(ck.messages(agentId, callId), 0, -1);
    return raw.flatMap((m) => {
      const v = SessionMessage.parse(JSON.parse(m)).metrics?.responseMs;
      return v === undefined ? [] : [v];
    });
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
