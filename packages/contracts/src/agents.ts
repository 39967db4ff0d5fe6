import { z } from 'zod';
import { EpochMs, Id } from './common.js';
import { DeployRecord } from './deploys.js';
import { Flow } from './flow.js';
import { LatencyChange } from './metrics.js';

const AgentName = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

export const AgentSummary = z.object({
  id: Id,
  name: z.string(),
  createdAt: EpochMs,
  updatedAt: EpochMs,
});
export type AgentSummary = z.infer<typeof AgentSummary>;

export const Agent = AgentSummary.extend({
  /** Number of the latest version snapshot; 1 on creation, +1 per PATCH carrying a flow or a restore. */
  version: z.number().int().positive(),
  flow: Flow,
});
export type Agent = z.infer<typeof Agent>;

export const AgentList = z.array(AgentSummary);
export type AgentList = z.infer<typeof AgentList>;

export const CreateAgentBody = z.object({
  name: AgentName,
  flow: Flow.optional(),
});
export type CreateAgentBody = z.infer<typeof CreateAgentBody>;

/** Every field optional (spec): `{}` changes nothing and answers the agent as it is. */
export const PatchAgentBody = z.object({
  name: AgentName.optional(),
  flow: Flow.optional(),
});
export type PatchAgentBody = z.infer<typeof PatchAgentBody>;

/** The If-Match header as the client sent it: `*` or a list of entity tags (compared strongly). */
export const IfMatch = z.string().max(1000);
export type IfMatch = z.infer<typeof IfMatch>;

export const VersionSummary = z.object({
  version: z.number().int().positive(),
  createdAt: EpochMs,
  /** sha256 of the stored flow JSON; equal hashes mean identical content, stored once. */
  contentHash: z.string(),
  sizeBytes: z.number().int().nonnegative(),
});
export type VersionSummary = z.infer<typeof VersionSummary>;

export const VersionList = z.array(VersionSummary);
export type VersionList = z.infer<typeof VersionList>;

export const AgentVersion = VersionSummary.extend({ agentId: Id, flow: Flow });
export type AgentVersion = z.infer<typeof AgentVersion>;

export const VersionParams = z.object({ id: Id, version: z.coerce.number().int().positive() });
export type VersionParams = z.infer<typeof VersionParams>;

export const ArchivedAgent = z.object({
  id: Id,
  archived: z.literal(true),
  archivedAt: EpochMs,
  /** The deploy that was live, now `stopped` (an archived agent answers no caller); null when none was. */
  stoppedDeploy: DeployRecord.nullable(),
});
export type ArchivedAgent = z.infer<typeof ArchivedAgent>;

/** Internal: the cheap existence check other services make before touching an agent's history. */
export const AgentLookup = z.object({
  id: Id,
  exists: z.boolean(),
  archived: z.boolean(),
  name: z.string().optional(),
  version: z.number().int().positive().optional(),
});
export type AgentLookup = z.infer<typeof AgentLookup>;

// ---- version diff ------------------------------------------------------------------------------

export const VersionDiffParams = z.object({
  id: Id,
  a: z.coerce.number().int().positive(),
  b: z.coerce.number().int().positive(),
});
export type VersionDiffParams = z.infer<typeof VersionDiffParams>;

/** `canvas=true` also reports canvas-only changes (positions and the like), apart from the params. */
export const VersionDiffQuery = z.object({ canvas: z.enum(['true', 'false']).optional() });
export type VersionDiffQuery = z.infer<typeof VersionDiffQuery>;

export const FieldChange = z.object({
  name: z.string(),
  /** Absent on one side: the field was added or removed. */
  before: z.unknown().optional(),
  after: z.unknown().optional(),
});
export type FieldChange = z.infer<typeof FieldChange>;

export const NodeChange = z.object({ id: z.string(), fields: z.array(FieldChange) });
export type NodeChange = z.infer<typeof NodeChange>;

export const EdgeRef = z.object({
  source: z.string(),
  sourceHandle: z.string().nullable(),
  target: z.string(),
  targetHandle: z.string().nullable(),
});
export type EdgeRef = z.infer<typeof EdgeRef>;

export const VersionDiff = z.object({
  agentId: Id,
  from: z.number().int().positive(),
  to: z.number().int().positive(),
  nodes: z.object({
    added: z.array(z.string()),
    removed: z.array(z.string()),
    /** Nodes whose params (anything but canvas fields) differ: each param before and after. */
    changed: z.array(NodeChange),
  }),
  /** Edges by their ends (source, handle, target, handle): an edge id or style alone is canvas. */
  edges: z.object({ added: z.array(EdgeRef), removed: z.array(EdgeRef) }),
  /** Canvas-only changes (position, size, selection, style…) per node; empty unless asked for. */
  canvas: z.array(NodeChange),
  /** How each figure's p50 changed from the first version's sessions to the second's (ms); empty without both. */
  latency: z.array(LatencyChange),
});
export type VersionDiff = z.infer<typeof VersionDiff>;
