import { z } from 'zod';
import { EpochMs, Id } from './common.js';

/**
 * Deploy records (the sessions service keeps them). Their own module because the agents service's archive
 * answers with the deploy it took offline, and the agents' contracts are imported by the sessions' ones.
 */

/**
 * `superseded` (a newer deploy went live) and `stopped` (taken offline: its agent was archived) are set only
 * by the service; both are final. A canary (a deploy created with `trafficPercent`, decision 0035) goes
 * `building` → `canary` (beside the live deploy, taking its share of new calls) → `live` (promoted: by hand or
 * after its `canaryWindowMs`) | `rolled_back` (the canary rule found it worse; final) | `superseded` (another
 * deploy went live or another canary started) | `stopped`.
 */
export const DeployStatus = z.enum([
  'pending',
  'building',
  'live',
  'failed',
  'superseded',
  'stopped',
  'canary',
  'rolled_back',
]);
export type DeployStatus = z.infer<typeof DeployStatus>;

/** A deploy's call settings: what a caller of its live version may use (issue 45). */
export const DEFAULT_DEPLOY_SETTINGS = {
  maxConcurrentCalls: 10,
  dailyCallCap: null,
  maxCallDurationMs: 600_000,
  silenceTimeoutMs: 60_000,
  endCallMessage: 'We have reached the time limit for this call. Thank you for calling, goodbye.',
} as const;

const settingFields = {
  /** Calls of this deploy at once; one more is refused (429 CAPACITY_EXHAUSTED with `capacity: 'deploy'`, recorded as a `busy` call). */
  maxConcurrentCalls: z.number().int().min(1).max(1000),
  /** Calls started per UTC day; null: no daily cap. */
  dailyCallCap: z.number().int().min(1).max(1_000_000).nullable(),
  /** A call is ended (`max_duration`, after `endCallMessage`) this long after its start. */
  maxCallDurationMs: z
    .number()
    .int()
    .min(10_000)
    .max(4 * 3_600_000),
  /** A call in which nobody spoke (neither side) this long is ended (`silence_timeout`); null: never. */
  silenceTimeoutMs: z.number().int().min(5_000).max(3_600_000).nullable(),
  /** What the agent says when a call reaches its maximum duration; empty: it hangs up without a word. */
  endCallMessage: z.string().max(500),
};

export const DeploySettings = z.object(settingFields);
export type DeploySettings = z.infer<typeof DeploySettings>;

/** The settings as a create or an update body takes them: each one optional. */
const optionalSettingFields = DeploySettings.partial().shape;

/**
 * Why a deploy failed: the pipeline's own findings (`TESTS_NOT_PASSED`, `MISSING_CREDENTIALS`, …) or the
 * readiness check's flow issues (their `FlowIssueCode`s), as a public caller's start would meet them.
 */
export const DeployIssue = z.object({
  code: z.string().max(100),
  message: z.string().max(2000),
  nodeId: z.string().max(200).optional(),
});
export type DeployIssue = z.infer<typeof DeployIssue>;

export const DeployFailure = z.object({
  reason: z.string().max(2000),
  issues: z.array(DeployIssue).max(200),
  at: EpochMs,
});
export type DeployFailure = z.infer<typeof DeployFailure>;

/** One side's figures as the canary rule judged them (calls started since the canary went live). */
export const CanarySide = z.object({
  deployId: Id,
  /** Calls whose analysis judged criteria (`success` true or false). */
  judged: z.number().int().nonnegative(),
  passed: z.number().int().nonnegative(),
  successRate: z.number().min(0).max(1).nullable(),
  /** Ended calls that measured the caller's wait, and the median of their own p50s (ms). */
  timed: z.number().int().nonnegative(),
  responseP50Ms: z.number().nonnegative().nullable(),
});
export type CanarySide = z.infer<typeof CanarySide>;

/** Why a canary was rolled back: the rule that fired, with both sides' figures (decision 0035). */
export const CanaryRollback = z.object({
  rule: z.enum(['success_rate', 'response_time']),
  reason: z.string().max(2000),
  at: EpochMs,
  canary: CanarySide,
  live: CanarySide,
  /** The two-proportion z statistic of live's success rate over the canary's (success_rate rule). */
  z: z.number().nullable(),
});
export type CanaryRollback = z.infer<typeof CanaryRollback>;

export const DeployRecord = z.object({
  id: Id,
  agentId: Id,
  deployNumber: z.number().int().positive(),
  /** The agent version this deploy pins. */
  version: z.number().int().positive(),
  status: DeployStatus,
  subdomain: z.string(),
  createdAt: EpochMs,
  updatedAt: EpochMs,
  /** Present when it went live past a failing (or missing) test run, by the emergency override. */
  gateOverride: z.object({ reason: z.string(), at: EpochMs }).optional(),
  /** Present on a `stopped` deploy: why and when it was taken offline (`agent archived`). */
  stopped: z.object({ reason: z.string(), at: EpochMs }).optional(),
  ...settingFields,
  /** true: an external deployer moves it (`PATCH`); absent: the pipeline does. */
  external: z.boolean().optional(),
  /** When it went live (absent until then). */
  liveAt: EpochMs.optional(),
  /** Present on a `failed` deploy the pipeline failed: why, with the readiness issues. */
  failure: DeployFailure.optional(),
  /** A canary's share of new calls (1–99 %); absent on a full deploy (decision 0035). */
  trafficPercent: z.number().int().min(1).max(99).optional(),
  /** A canary not rolled back this long after it went canary is promoted by itself; absent: by hand only. */
  canaryWindowMs: z.number().int().optional(),
  /** Present on a `rolled_back` canary: the rule that fired and both sides' figures. */
  rollback: CanaryRollback.optional(),
  /** When a canary was promoted to the full live deploy, and how. */
  promoted: z.object({ at: EpochMs, by: z.enum(['hand', 'window']) }).optional(),
});
export type DeployRecord = z.infer<typeof DeployRecord>;

export const DeployList = z.array(DeployRecord);
export type DeployList = z.infer<typeof DeployList>;

export const DeployParams = z.object({ id: Id, deployId: Id });
export type DeployParams = z.infer<typeof DeployParams>;

/**
 * `POST /api/agents/:id/deploys`: every field optional. `version` pins a stored version (default: the agent's
 * current one) — a rollback is a deploy of an older version. The record then moves by itself (the pipeline):
 * `pending` → `building` → `live` | `failed`.
 */
export const CreateDeployBody = z
  .object({
    version: z.number().int().positive().optional(),
    /**
     * true: an external deployer moves this record with `PATCH` (the spec's transitions: pending → building →
     * live | failed) and the pipeline leaves it alone. Default: the pipeline moves it.
     */
    external: z.boolean().optional(),
    /**
     * A canary (decision 0035): after the gate and the readiness check it takes this share of new calls beside
     * the current live deploy (sticky per caller), until promoted or rolled back. Absent: a full deploy.
     */
    trafficPercent: z.number().int().min(1).max(99).optional(),
    /** A canary not rolled back this long after going canary is promoted by itself (10 s – 30 days). */
    canaryWindowMs: z
      .number()
      .int()
      .min(10_000)
      .max(30 * 86_400_000)
      .optional(),
    ...optionalSettingFields,
  })
  .strict()
  .refine((b) => b.canaryWindowMs === undefined || b.trafficPercent !== undefined, {
    message: 'canaryWindowMs is a canary setting: send trafficPercent too',
  });
export type CreateDeployBody = z.infer<typeof CreateDeployBody>;

/**
 * `PATCH …/deploys/:deployId`: a status of an external deployer (the spec's transitions), and/or call
 * settings (they apply to calls started afterwards). `superseded` and `stopped` are set only by the service.
 */
export const UpdateDeployBody = z.object({
  status: z.enum(['building', 'live', 'failed']).optional(),
  ...optionalSettingFields,
  /**
   * Emergency: go live although the agent's deploy gate would refuse (no passing run on this version). The
   * reason is recorded on the deploy (`gateOverride`).
   */
  override: z.object({ reason: z.string().trim().min(1).max(500) }).optional(),
});
export type UpdateDeployBody = z.infer<typeof UpdateDeployBody>;

/** Internal (agents → sessions): take the agent's live deploy offline, saying why. */
export const StopDeploysRequest = z.object({ agentId: Id, reason: z.string().min(1).max(200) });
export type StopDeploysRequest = z.infer<typeof StopDeploysRequest>;

/** The deploy that was live and is now `stopped`; null when none was live (asking again is safe). */
export const StoppedDeploy = z.object({ deploy: DeployRecord.nullable() });
export type StoppedDeploy = z.infer<typeof StoppedDeploy>;

/** Why an archive stopped a deploy: the agents service sends it, and the sessions service uses it alike. */
export const ARCHIVED_AGENT_REASON = 'agent archived';

/** The settings part of a body (create or update): the fields sent, nothing else. */
export function settingsOf(body: Partial<DeploySettings>): Partial<DeploySettings> {
  const out: Partial<DeploySettings> = {};
  for (const k of Object.keys(settingFields) as (keyof DeploySettings)[]) {
    if (body[k] !== undefined) (out as Record<string, unknown>)[k] = body[k];
  }
  return out;
}

// ---- what is live, for every gateway and playground instance at once --------------------------------

/**
 * The JetStream KV bucket of live deploys, key = subdomain: written when a deploy goes live (or its settings
 * change), deleted when none of the agent's deploys is live. Gateways and playgrounds watch it, so the next
 * call on every instance runs the new version.
 */
export const LIVE_DEPLOYS_BUCKET = 'live-deploys';

/**
 * A deploy as the calls of its version need it: which agent version, under which subdomain, with which call
 * settings (what is live, `LiveDeploy`; what a call was admitted to, `AdmittedCall`).
 */
export const DeployedVersion = z.object({
  agentId: Id,
  deployId: Id,
  deployNumber: z.number().int().positive(),
  version: z.number().int().positive(),
  subdomain: z.string(),
  settings: DeploySettings,
});
export type DeployedVersion = z.infer<typeof DeployedVersion>;

export function deployedVersionOf(deploy: DeployRecord): DeployedVersion {
  return {
    agentId: deploy.agentId,
    deployId: deploy.id,
    deployNumber: deploy.deployNumber,
    version: deploy.version,
    subdomain: deploy.subdomain,
    settings: {
      maxConcurrentCalls: deploy.maxConcurrentCalls,
      dailyCallCap: deploy.dailyCallCap,
      maxCallDurationMs: deploy.maxCallDurationMs,
      silenceTimeoutMs: deploy.silenceTimeoutMs,
      endCallMessage: deploy.endCallMessage,
    },
  };
}

export const LiveDeploy = DeployedVersion.extend({ liveAt: EpochMs });
export type LiveDeploy = z.infer<typeof LiveDeploy>;
