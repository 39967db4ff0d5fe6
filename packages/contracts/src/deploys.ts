import { z } from 'zod';
import { EpochMs, Id } from './common.js';

/**
 * Deploy records (the sessions service keeps them). Their own module because the agents service's archive
 * answers with the deploy it took offline, and the agents' contracts are imported by the sessions' ones.
 */

/**
 * `superseded` (a newer deploy went live) and `stopped` (taken offline: its agent was archived) are set only
 * by the service; both are final.
 */
export const DeployStatus = z.enum(['pending', 'building', 'live', 'failed', 'superseded', 'stopped']);
export type DeployStatus = z.infer<typeof DeployStatus>;

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
});
export type DeployRecord = z.infer<typeof DeployRecord>;

export const DeployList = z.array(DeployRecord);
export type DeployList = z.infer<typeof DeployList>;

export const DeployParams = z.object({ id: Id, deployId: Id });
export type DeployParams = z.infer<typeof DeployParams>;

/** `superseded` and `stopped` are set only by the service. */
export const UpdateDeployBody = z.object({
  status: z.enum(['building', 'live', 'failed']),
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
