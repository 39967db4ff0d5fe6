import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/**
 * The analysis worker's result: stored on the call at most once per job (a redelivered job answers
 * `stored: false`), then `call.analyzed` is published (the webhooks service delivers it) and the agent's
 * canary, if one runs, judged.
 */
export const callsAnalysisStore =
  ({ calls, events, canary }: Deps): Handler<'sessions.calls.analysis.store'> =>
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
    // a new verdict: the agent's canary, if one runs, is judged again (decision 0035)
    canary.check(req.agentId);
    return { stored: true };
  };
