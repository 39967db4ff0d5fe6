import { AppError } from '@vab/contracts';
import { safeError, type Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Queues a call's analysis again (the criteria changed): its result replaces the one stored. */
export const callsAnalyze =
  ({ calls, analysisQueue }: Deps): Handler<'sessions.calls.analyze'> =>
  async (req, ctx) => {
    const call = await calls.get(req.agentId, req.callId);
    if (call.status === 'active')
      throw new AppError('CONFLICT', 'the call is still going on: it is analysed when it ends');
    try {
      const job = await analysisQueue.enqueue(req.agentId, req.callId);
      ctx.log.info({ agentId: req.agentId, callId: req.callId, jobId: job.jobId }, 'call analysis queued');
      return { queued: true, jobId: job.jobId };
    } catch (err) {
      ctx.log.warn(
        { code: 'ANALYSIS_NOT_QUEUED', err: safeError(err), agentId: req.agentId, callId: req.callId },
        'call analysis not queued',
      );
      throw new AppError('SERVICE_UNAVAILABLE', 'the analysis queue is unavailable: try again');
    }
  };
