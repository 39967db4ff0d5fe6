import { z } from 'zod';

/**
 * SimpleNode / SimpleEdge as the builder sends them (the flow format: docs/api.md), canvas fields and all
 * (`position`, `data`, `measured`, `selected`, edge `id`, `type`, `style`, …). Storage keeps exactly what was
 * sent, every field and every null: only what storage itself needs is checked here. Whether a flow can run
 * is the readiness check's business (the playground), not storage's.
 */
export const SimpleNode = z.looseObject({
  id: z.string().max(200),
});
export type SimpleNode = z.infer<typeof SimpleNode>;

/** A canvas with one handle on a node serializes it as `null` (React Flow) or leaves it out. */
const Handle = z.string().max(100).nullish();

export const SimpleEdge = z.looseObject({
  source: z.string().max(200),
  sourceHandle: Handle,
  target: z.string().max(200),
  targetHandle: Handle,
});
export type SimpleEdge = z.infer<typeof SimpleEdge>;

export const MAX_FLOW_NODES = 500;
export const MAX_FLOW_EDGES = 2000;

export const Flow = z.looseObject({
  nodes: z.array(SimpleNode).max(MAX_FLOW_NODES),
  edges: z.array(SimpleEdge).max(MAX_FLOW_EDGES),
});
export type Flow = z.infer<typeof Flow>;

export const EMPTY_FLOW: Flow = { nodes: [], edges: [] };
