import { z } from 'zod';
import { SimpleEdge, SimpleNode } from './flow.js';

export const LivekitCredentials = z.object({
  url: z.string().min(1).max(2000),
  apiKey: z.string().min(1).max(500),
  apiSecret: z.string().min(1).max(500),
});
export type LivekitCredentials = z.infer<typeof LivekitCredentials>;

export const AgentSessionRequest = z.object({
  nodes: z.array(SimpleNode),
  edges: z.array(SimpleEdge),
  livekit: LivekitCredentials.optional(),
  apiKeys: z.record(z.string().max(100), z.string().max(2000)).optional(),
  agentId: z.string().optional(),
});
export type AgentSessionRequest = z.infer<typeof AgentSessionRequest>;

export const PlaygroundSession = z.object({
  token: z.string(),
  roomName: z.string(),
  serverUrl: z.string(),
});
export type PlaygroundSession = z.infer<typeof PlaygroundSession>;

export const EndAgentSessionBody = z.object({ roomName: z.string().min(1).max(200) });
export type EndAgentSessionBody = z.infer<typeof EndAgentSessionBody>;

export const ProviderKeyStatus = z.object({
  envKeys: z.object({
    openai: z.boolean(),
    anthropic: z.boolean(),
    elevenlabs: z.boolean(),
    deepgram: z.boolean(),
    livekit: z.boolean(),
  }),
  setupRequired: z.boolean(),
});
export type ProviderKeyStatus = z.infer<typeof ProviderKeyStatus>;

/** One finding of the flow compiler (packages/flow): a stable code, a message, and where. */
export const FlowIssue = z.object({
  code: z.string(),
  message: z.string(),
  nodeId: z.string().optional(),
  edgeIndex: z.number().int().nonnegative().optional(),
});
export type FlowIssue = z.infer<typeof FlowIssue>;

export const FlowValidation = z.object({ valid: z.boolean(), issues: z.array(FlowIssue) });
export type FlowValidation = z.infer<typeof FlowValidation>;
