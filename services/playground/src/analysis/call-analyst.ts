import type { BusClient } from '@vab/bus';
import {
  ANALYSIS_MIN_MESSAGES,
  AppError,
  Subjects,
  type AnalysisJob,
  type CallAnalysis,
  type CriterionVerdict,
} from '@vab/contracts';
import { z } from 'zod';
import { extractFields } from '../conversation/decide.js';
import { transcriptText, type Turn } from '../conversation/transcript.js';
import type { StoredCredentials } from '../live/stored-credentials.js';
import { CaseModelClient, forcedToolCall } from '../models/model-call.js';
import type { ModelFactory } from '../models/model-factory.js';
import type { KeyEnv } from '../models/provider-keys.js';
import { sessionRedactor } from '../sessions/redactor.js';
import { judgeCallCriteria } from '../testing/judges.js';

const SUMMARY_TOOL = 'summary';
const Summary = z.object({ summary: z.string().trim().min(1).max(4000) });

/** `success`: true when every criterion passed, false when one failed, else (none, or one unknown) null. */
export function successOf(criteria: CriterionVerdict[]): boolean | null {
  if (criteria.some((c) => c.verdict === 'failed')) return false;
  if (criteria.length === 0 || criteria.some((c) => c.verdict === 'unknown')) return null;
  return true;
}

/**
 * Analyses one ended call (issue 47) with the agent's analysis settings as they are now: a summary, the
 * criteria judged, the data fields extracted (the `structured_output` node's extraction), by the analyst
 * model — the settings' or the agent model of the version the call ran — under the key rule with the
 * agent's stored credentials (opened here only). A call too short to judge is marked so and no model is asked.
 * Answers null when there is nothing to analyse (the call is gone, or still going on).
 */
export class CallAnalyst {
  constructor(
    private readonly deps: {
      bus: BusClient;
      models: ModelFactory;
      credentials: StoredCredentials;
      env: () => Promise<KeyEnv>;
      busTimeoutMs: number;
      modelTimeoutMs: number;
    },
  ) {}

  async analyse(job: AnalysisJob): Promise<CallAnalysis | null> {
    const { bus, busTimeoutMs } = this.deps;
    const requestId = `analysis-${job.jobId}`;
    const ask = { timeoutMs: busTimeoutMs, requestId };
    const call = await bus
      .request(Subjects.callsGet, { agentId: job.agentId, callId: job.callId }, ask)
      .catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return null;
        throw err;
      });
    if (!call || call.status !== 'ended') return null;
    const transcript: Turn[] = call.messages
      .filter((m) => (m.role === 'user' || m.role === 'assistant') && m.content.trim() !== '')
      .map((m) => ({ role: m.role as Turn['role'], content: m.content }));
    if (transcript.length < ANALYSIS_MIN_MESSAGES || !transcript.some((t) => t.role === 'user'))
      return { skipped: 'too_short', at: Date.now() };

    const [settings, version, apiKeys, env] = await Promise.all([
      bus.request(Subjects.analysisSettingsGet, { agentId: job.agentId }, ask),
      bus.request(Subjects.agentsVersionsGet, { id: job.agentId, version: call.version }, ask),
      this.deps.credentials.apiKeys(job.agentId, requestId),
      this.deps.env(),
    ]);
    const redactor = sessionRedactor(env, apiKeys);
    try {
      // the flow's agent model stands in when the settings name none (the key rule applies to both)
      const flow = this.deps.models.require(version.flow, 'test', env, apiKeys);
      const model = this.deps.models.requireModel(
        { role: 'analyst', setting: 'analysis.model' },
        settings.model,
        flow.config.providers.llm,
        env,
        apiKeys,
      );
      const client = new CaseModelClient(model, this.deps.modelTimeoutMs);
      const [summary, criteria, data] = await Promise.all([
        settings.summary ? this.summarise(client, transcript) : null,
        judgeCallCriteria(client, settings.criteria, transcript),
        settings.dataFields.length > 0
          ? extractFields(client, transcript, 'Extract the fields from the call.', settings.dataFields)
          : {},
      ]);
      return redactor.deep({
        summary,
        criteria,
        success: successOf(criteria),
        data,
        // the provider as the builder named it (LiveKit names one at its own URL by its host)
        model: {
          provider: settings.model?.provider ?? flow.config.providers.llm.provider,
          model: model.model,
        },
        usage: client.usage(),
        at: Date.now(),
      });
    } catch (err) {
      // a model's error may echo a key
      if (err instanceof Error) err.message = redactor.text(err.message);
      throw err;
    }
  }

  private async summarise(client: CaseModelClient, transcript: Turn[]): Promise<string> {
    const { summary } = await forcedToolCall(
      client,
      [
        {
          role: 'system',
          content:
            'You summarise a finished call between a voice agent and a caller in two to four sentences: what ' +
            `the caller wanted and how it ended. Answer only by calling ${SUMMARY_TOOL}.`,
        },
        { role: 'user', content: transcriptText(transcript) },
      ],
      { name: SUMMARY_TOOL, description: 'Record the summary.', parameters: Summary },
    );
    return summary;
  }
}
