import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * The analysis worker's result: stored on the call at most once per job (a redelivered job answers
 * `stored: false`), then `call.analyzed` is published (the webhooks service delivers it).
 */
export const callsAnalysisStore =
  ({ calls, events }: Deps): Handler<'sessions.calls.analysis.store'> =>
  async (req, ctx) => {
    const outcome = await calls.setAnalysis(req);
    if (outcome !== 'stored') {
      ctx.log.info(
        { agentId: req.agentId, callId: req.callId, jobId: req.jobId, outcome },
        'call analysis not stored',
      );
      return { stored: false };
    }
    ctx.log.info({ agentId: req.agentId, callId: req.callId, jobId: req.jobId }, 'call analysis stored');
    await events.publish(req.agentId, 'call.analyzed', { callId: req.callId, analysis: req.analysis });
    return { stored: true };
  };
