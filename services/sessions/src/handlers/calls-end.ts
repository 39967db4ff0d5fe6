import { safeError, type Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * The host reports a call's end (the first end stands): its slots are given back, `call.ended` published, and
 * its analysis queued when the agent has analysis on — after the record is closed, so analysis never holds up
 * the end; a queue that cannot take the job is logged (the call can be analysed again by hand).
 */
export const callsEnd =
  ({ calls, events, analysisSettings, analysisQueue, canary }: Deps): Handler<'sessions.calls.end'> =>
  async (req, ctx) => {
    const ended = await calls.end(req);
    if (ended) {
      ctx.log.info({ agentId: req.agentId, callId: req.callId, endedReason: req.endedReason }, 'call ended');
      await events.publish(req.agentId, 'call.ended', { call: ended });
      // the canary rule's response time needs no analysis: judged at each end too (decision 0035)
      canary.check(req.agentId);
      try {
        if ((await analysisSettings.get(req.agentId)).enabled) {
          const job = await analysisQueue.enqueue(req.agentId, req.callId);
          ctx.log.info(
            { agentId: req.agentId, callId: req.callId, jobId: job.jobId },
            'call analysis queued',
          );
        }
      } catch (err) {
        ctx.log.warn(
          { code: 'ANALYSIS_NOT_QUEUED', err: safeError(err), agentId: req.agentId, callId: req.callId },
          'call analysis not queued',
        );
      }
    }
    return { ok: true };
  };
