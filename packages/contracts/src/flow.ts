import { z } from 'zod';

/**
 * SimpleNode / SimpleEdge as the builder serializes them (shared/spec/flow-format.md). Storage keeps
 * whatever the builder sent: unknown params and node types pass through verbatim, because a draft may be
 * half-built. Only running or validating a flow needs it to be runnable (packages/flow).
 */
export const SimpleNode = z.looseObject({
  id: z.string().min(1).max(200),
  nodeType: z.string().min(1).max(100),
  provider: z.string().max(100).optional(),
});
export type SimpleNode = z.infer<typeof SimpleNode>;

export const SimpleEdge = z.looseObject({
  source: z.string().min(1).max(200),
  sourceHandle: z.string().max(100),
  target: z.string().min(1).max(200),
  targetHandle: z.string().max(100),
});
export type SimpleEdge = z.infer<typeof SimpleEdge>;

export const MAX_FLOW_NODES = 500;
export const MAX_FLOW_EDGES = 2000;

export const Flow = z.object({
  nodes: z.array(SimpleNode).max(MAX_FLOW_NODES),
  edges: z.array(SimpleEdge).max(MAX_FLOW_EDGES),
});
export type Flow = z.infer<typeof Flow>;

export const EMPTY_FLOW: Flow = { nodes: [], edges: [] };
