import { z } from 'zod';
import { EpochMs, Id, subjectToken } from './common.js';
import { SessionUsage } from './metrics.js';
import { CaseModel, Criterion } from './sessions.js';

/**
 * Post-call analysis (issue 47, docs/decisions/0034-post-call-analysis.md): per agent, what is asked of every
 * ended call (a summary, success criteria judged as a test case's criteria, data fields extracted as a flow's
 * `structured_output` node extracts them) and the model that does it, under the key rule with the agent's
 * stored credentials. Worked off the call's path, from the JetStream work queue `CALL_ANALYSIS`.
 */

export const ANALYSIS_STREAM = 'CALL_ANALYSIS';
export const ANALYSIS_SUBJECTS = 'analysis.jobs.>';
/** The durable pull consumer every playground instance shares. */
export const ANALYSIS_CONSUMER = 'call-analysis';
export const analysisJobSubject = (agentId: string) =>
  `analysis.jobs.${subjectToken(agentId, 'an agent id')}`;

/**
 * A call is judged only when there is something to judge: at least this many messages, one of them the
 * caller's. Below it the analysis is `{ skipped: 'too_short' }` (no model is asked).
 */
export const ANALYSIS_MIN_MESSAGES = 2;

const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** One field to extract: the same shape as a `structured_output` node's `schemaFields` entry. */
export const AnalysisField = z
  .object({
    name: z.string().regex(FIELD_NAME, 'must be letters, digits and _ (1–64, not starting with a digit)'),
    type: z.enum(['string', 'int', 'float', 'boolean', 'list', 'enum']),
    description: z.string().trim().max(1000).optional(),
    options: z.array(z.string().trim().min(1).max(200)).min(1).max(50).optional(),
  })
  .strict()
  .refine((f) => f.type !== 'enum' || f.options !== undefined, {
    message: 'an enum field needs its options',
    path: ['options'],
  });
export type AnalysisField = z.infer<typeof AnalysisField>;

export const AnalysisSettings = z
  .object({
    /** false: calls are not analysed (the default until the builder sets them). */
    enabled: z.boolean(),
    /** A few sentences on what the caller wanted and how it went. */
    summary: z.boolean(),
    /** Each judged passed / failed / unknown with a reason; the call's `success` is theirs. */
    criteria: z.array(Criterion).max(20),
    /** Typed fields extracted from the transcript (null where the call did not say). */
    dataFields: z
      .array(AnalysisField)
      .max(30)
      .refine((fs) => new Set(fs.map((f) => f.name)).size === fs.length, {
        message: 'field names must be unique',
      }),
    /** The analyst model; null: the flow's own agent model (of the version the call ran). */
    model: CaseModel.nullable(),
  })
  .strict()
  .refine((s) => new Set(s.criteria.map((c) => c.name)).size === s.criteria.length, {
    message: 'criterion names must be unique',
    path: ['criteria'],
  });
export type AnalysisSettings = z.infer<typeof AnalysisSettings>;
export const DEFAULT_ANALYSIS_SETTINGS: AnalysisSettings = {
  enabled: false,
  summary: true,
  criteria: [],
  dataFields: [],
  model: null,
};

export const CriterionVerdict = z.object({
  name: z.string(),
  verdict: z.enum(['passed', 'failed', 'unknown']),
  reason: z.string(),
});
export type CriterionVerdict = z.infer<typeof CriterionVerdict>;

/** A call analysed: `success` is true when every criterion passed, false when one failed, else null. */
export const CallAnalysisResult = z.object({
  summary: z.string().nullable(),
  criteria: z.array(CriterionVerdict),
  success: z.boolean().nullable(),
  data: z.record(z.string(), z.unknown()),
  model: z.object({ provider: z.string(), model: z.string() }),
  usage: SessionUsage,
  at: EpochMs,
});
export type CallAnalysisResult = z.infer<typeof CallAnalysisResult>;

/**
 * What a call's analysis came to: a result; `skipped` (`too_short`: under ANALYSIS_MIN_MESSAGES or the
 * caller never spoke); or `failed` (the model could not be run or kept answering wrong, after the queue's
 * attempts), its message redacted.
 */
export const CallAnalysis = z.union([
  CallAnalysisResult.strict(),
  z.object({ skipped: z.literal('too_short'), at: EpochMs }).strict(),
  z.object({ failed: z.object({ code: z.string(), message: z.string() }), at: EpochMs }).strict(),
]);
export type CallAnalysis = z.infer<typeof CallAnalysis>;

/** One job of the queue: analyse this call. `jobId` makes a redelivered job store at most one result. */
export const AnalysisJob = z.object({
  agentId: Id,
  callId: Id,
  jobId: Id,
  requestedAt: EpochMs,
});
export type AnalysisJob = z.infer<typeof AnalysisJob>;

/** `sessions.calls.analysis.store`: the worker's result; `stored: false` when this job's result was stored already. */
export const StoreAnalysisRequest = z.object({
  agentId: Id,
  callId: Id,
  jobId: Id,
  requestedAt: EpochMs,
  analysis: CallAnalysis,
});
export type StoreAnalysisRequest = z.infer<typeof StoreAnalysisRequest>;

export const StoreAnalysisResponse = z.object({ stored: z.boolean() });
export type StoreAnalysisResponse = z.infer<typeof StoreAnalysisResponse>;

/** `POST …/calls/:callId/analysis`: the job queued (its result replaces the call's analysis). */
export const AnalysisQueued = z.object({ queued: z.literal(true), jobId: Id });
export type AnalysisQueued = z.infer<typeof AnalysisQueued>;
