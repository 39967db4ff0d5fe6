import { z } from 'zod';
import { EpochMs, Id } from './common.js';
import { SimpleEdge, SimpleNode } from './flow.js';

// ---- builder conversation ----------------------------------------------------------------------

/** The graph edits one builder-chat turn produced, in the flow format's node/edge terms. */
const EdgeRef = z.object({
  source: z.string().min(1).max(200),
  sourceHandle: z.string().max(100),
  target: z.string().min(1).max(200),
  targetHandle: z.string().max(100),
});
export const FlowOperation = z.discriminatedUnion('type', [
  z.object({ type: z.literal('add_node'), node: SimpleNode }),
  z.object({
    type: z.literal('update_node'),
    nodeId: z.string().min(1).max(200),
    /** Params merged into the node (flat, like SimpleNode params). */
    params: z.record(z.string(), z.unknown()),
  }),
  z.object({ type: z.literal('remove_node'), nodeId: z.string().min(1).max(200) }),
  z.object({ type: z.literal('add_edge'), edge: SimpleEdge }),
  z.object({ type: z.literal('remove_edge'), edge: EdgeRef }),
]);
export type FlowOperation = z.infer<typeof FlowOperation>;

export const BuilderRole = z.enum(['user', 'assistant']);
export type BuilderRole = z.infer<typeof BuilderRole>;

export const ConversationEntry = z.object({
  id: Id,
  role: BuilderRole,
  content: z.string(),
  operations: z.array(FlowOperation),
  /** Ids of the canvas nodes the user attached to the message. */
  nodeAttachments: z.array(z.string()),
  timestamp: EpochMs,
});
export type ConversationEntry = z.infer<typeof ConversationEntry>;

export const ConversationList = z.array(ConversationEntry);
export type ConversationList = z.infer<typeof ConversationList>;

/** Limits are enforced by the sessions service (configurable there); the schema only bounds the shape. */
export const CreateConversationEntryBody = z.object({
  role: BuilderRole,
  content: z.string(),
  operations: z.array(FlowOperation).default([]),
  nodeAttachments: z.array(z.string().min(1).max(200)).max(100).default([]),
});
export type CreateConversationEntryBody = z.infer<typeof CreateConversationEntryBody>;

// ---- test sessions -----------------------------------------------------------------------------

export const SessionType = z.enum(['voice', 'text']);
export type SessionType = z.infer<typeof SessionType>;

export const TestSession = z.object({
  id: Id,
  agentId: Id,
  startedAt: EpochMs,
  /** null while the session is open. */
  endedAt: EpochMs.nullable(),
  durationMs: z.number().int().nonnegative().nullable(),
  roomName: z.string().nullable(),
  sessionType: SessionType,
  status: z.enum(['open', 'closed']),
});
export type TestSession = z.infer<typeof TestSession>;

export const TestSessionList = z.array(TestSession);
export type TestSessionList = z.infer<typeof TestSessionList>;

export const CreateTestSessionBody = z.object({
  sessionType: SessionType,
  roomName: z.string().min(1).max(200).optional(),
});
export type CreateTestSessionBody = z.infer<typeof CreateTestSessionBody>;

export const CloseTestSessionBody = z.object({
  endedAt: EpochMs,
  durationMs: z.number().int().nonnegative(),
});
export type CloseTestSessionBody = z.infer<typeof CloseTestSessionBody>;

export const TestSessionParams = z.object({ id: Id, sessionId: Id });
export type TestSessionParams = z.infer<typeof TestSessionParams>;

export const MessageRole = z.enum(['user', 'assistant', 'system', 'tool']);
export type MessageRole = z.infer<typeof MessageRole>;

export const SessionMessage = z.object({
  role: MessageRole,
  content: z.string(),
  stepId: z.string().max(200),
  timestamp: EpochMs,
});
export type SessionMessage = z.infer<typeof SessionMessage>;

export const SessionMessageList = z.array(SessionMessage);
export type SessionMessageList = z.infer<typeof SessionMessageList>;

export const AppendMessageBody = SessionMessage;
export type AppendMessageBody = z.infer<typeof AppendMessageBody>;

export const AppendedMessage = z.object({
  /** 1-based arrival position of the message within its session. */
  seq: z.number().int().positive(),
  message: SessionMessage,
});
export type AppendedMessage = z.infer<typeof AppendedMessage>;

// ---- deploys -----------------------------------------------------------------------------------

export const DeployStatus = z.enum(['pending', 'building', 'live', 'failed', 'superseded']);
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
});
export type DeployRecord = z.infer<typeof DeployRecord>;

export const DeployList = z.array(DeployRecord);
export type DeployList = z.infer<typeof DeployList>;

export const DeployParams = z.object({ id: Id, deployId: Id });
export type DeployParams = z.infer<typeof DeployParams>;

/** `superseded` is set only by the service, when a newer deploy goes live. */
export const UpdateDeployBody = z.object({ status: z.enum(['building', 'live', 'failed']) });
export type UpdateDeployBody = z.infer<typeof UpdateDeployBody>;

export const EmptyBody = z.object({}).strict();
export type EmptyBody = z.infer<typeof EmptyBody>;
