import { z } from 'zod';
import { EpochMs, Id } from './common.js';

/**
 * Who said something, in builder chat or a transcript: any short identifier. The usual ones are `user`,
 * `assistant` (or `agent`), `system` and `tool`; a front end with its own vocabulary keeps it.
 */
export const Role = z
  .string()
  .min(1)
  .max(32)
  .regex(
    /^[A-Za-z][A-Za-z0-9_.:-]*$/,
    'must be a short identifier (a letter, then letters, digits, _ . : -)',
  );
export type Role = z.infer<typeof Role>;

// ---- builder conversation ----------------------------------------------------------------------

/**
 * One graph edit of a builder-chat turn. Its shape is the front end's (the spec leaves it "not shown"): any
 * JSON object, stored and returned as sent. The shapes this project's own tools write are documented in
 * docs/api.md (add_node, update_node, remove_node, add_edge, remove_edge).
 */
/**
 * Any JSON value (a body is parsed JSON, so that is all it can hold). Declared as unknown, not as zod's
 * recursive JSON type, so the API document and the typed client made from it stay plain.
 */
export const JsonValue = z.unknown().describe('Any JSON value');

export const FlowOperation = z.record(z.string(), JsonValue);
export type FlowOperation = z.infer<typeof FlowOperation>;

export const ConversationEntry = z.object({
  id: Id,
  role: Role,
  content: z.string(),
  operations: z.array(FlowOperation),
  /** What the user attached to the message (usually canvas node ids): any JSON values, as sent. */
  nodeAttachments: z.array(JsonValue),
  timestamp: EpochMs,
});
export type ConversationEntry = z.infer<typeof ConversationEntry>;

export const ConversationList = z.array(ConversationEntry);
export type ConversationList = z.infer<typeof ConversationList>;

/** Counts and bytes are bounded by the sessions service (configurable there); the schema bounds the shape. */
export const CreateConversationEntryBody = z.object({
  role: Role,
  content: z.string(),
  operations: z.array(FlowOperation).max(10_000).default([]),
  nodeAttachments: z.array(JsonValue).max(1000).default([]),
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

export const SessionMessage = z.object({
  role: Role,
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
