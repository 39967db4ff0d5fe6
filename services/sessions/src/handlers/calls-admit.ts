import type { Handler } from '@vab/bus';
import { AppError, deployedVersionOf, type BusyKind, type DeployRecord } from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import type { SessionsStore } from '../store.js';

/**
 * Which deploy a new call runs (decision 0035): the live one, or the running canary for its share of callers.
 * A caller with a key (web: its address hash; phone: its number's) keeps the side it was first drawn on for
 * `stickyMs`; one without is drawn afresh each call.
 */
async function canarySplit(
  store: SessionsStore,
  live: DeployRecord,
  callerKey: string | undefined,
  stickyMs: number,
  windowOver: () => void,
): Promise<DeployRecord> {
  const canary = await store.canaryDeploy(live.agentId);
  if (!canary?.trafficPercent) return live;
  // its window may be over: the judge promotes it (this call runs on the side drawn, as it would just before)
  const since = canary.liveAt ?? canary.updatedAt;
  if (canary.canaryWindowMs !== undefined && Date.now() >= since + canary.canaryWindowMs) windowOver();
  const side = callerKey
    ? await store.canarySide(live.agentId, canary.id, callerKey, canary.trafficPercent, stickyMs)
    : Math.random() * 100 < canary.trafficPercent
      ? 'canary'
      : 'live';
  return side === 'canary' ? canary : live;
}

/** Seconds to the next UTC day: when a daily cap lets calls in again. */
const toNextUtcDay = (now: number) => Math.ceil((86_400_000 - (now % 86_400_000)) / 1000);

/**
 * The playground asks before it hosts a call: the agent's live deploy (by subdomain or agent) or its canary
 * for the canary's share of callers, that deploy's caps
 * (LIVE_MAX_CALLS_PER_ADDRESS, maxConcurrentCalls, dailyCallCap), the sealed credentials. A refusal is
 * recorded as a call ended `busy` (a missed call the builder sees; a caller's first at its cap within a
 * minute: `recordsRefusal`) and answered CAPACITY_EXHAUSTED (the deploy's caps) or RATE_LIMITED (the
 * address's), with when to retry.
 */
export const callsAdmit =
  ({ store, agents, calls, live, events, canary, canaryStickyMs }: Deps): Handler<'sessions.calls.admit'> =>
  async (req, ctx) => {
    const agentId = req.agentId ?? (req.subdomain ? await store.agentOfSubdomain(req.subdomain) : null);
    const nothingLive = new AppError('NOT_FOUND', 'nothing is live here');
    if (!agentId) throw nothingLive;
    if ((await agents.lookup(agentId, ctx.requestId)).archived) throw nothingLive;
    const liveDeploy = await store.liveDeploy(agentId);
    if (!liveDeploy) throw nothingLive;
    // the builder turned the page off: a web call needs one of the agent's publishable keys (the widget's)
    if (req.channel === 'web' && req.keyId === undefined && !(await live.callSettings(agentId)).livePage)
      throw new AppError(
        'UNAUTHORIZED',
        "this agent's page is off: a call needs one of its publishable keys",
      );
    const deploy = await canarySplit(store, liveDeploy, req.callerKey ?? req.addressKey, canaryStickyMs, () =>
      canary.check(agentId),
    );
    const call = {
      agentId,
      callId: randomUUID(),
      deploy,
      channel: req.channel,
      caller: req.caller,
      addressKey: req.addressKey,
    };
    const admitted = await calls.admit(call);
    if (!admitted.ok) {
      const kind: BusyKind = admitted.kind;
      const callerKey = req.callerKey ?? req.addressKey;
      const recorded = await calls.recordsRefusal(agentId, kind, callerKey);
      if (recorded) {
        const busy = await calls.create(call, kind).catch(async (err: unknown) => {
          // not recorded after all: the caller's next refusal is
          await calls.forgetRefusal(agentId, kind, callerKey).catch(() => undefined);
          throw err;
        });
        await events.publish(agentId, 'call.ended', { call: busy });
      }
      ctx.log.info({ agentId, callId: call.callId, kind, recorded }, 'call refused at a cap');
      const retryAfterSeconds = kind === 'daily_call_cap' ? toNextUtcDay(Date.now()) : 5;
      throw kind === 'per_address'
        ? new AppError('RATE_LIMITED', 'too many calls from this address at once', { retryAfterSeconds })
        : new AppError('CAPACITY_EXHAUSTED', `this agent is busy (${kind}), try again later`, {
            retryAfterSeconds,
            capacity: 'deploy',
          });
    }
    const started = await calls.create(call);
    await events.publish(agentId, 'call.started', { call: started });
    return {
      ...deployedVersionOf(deploy),
      callId: call.callId,
      credentials: await live.sealed(agentId),
    };
  };
