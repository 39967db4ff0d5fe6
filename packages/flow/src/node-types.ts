import type { BranchStep, Step, StepKind } from './types.js';

export type Role = 'agent' | 'persona' | 'provider' | 'tool' | 'step' | 'post';

export interface NodeType {
  role: Role;
  in: string[];
  /** The output handles; `categories`: one `cat_<i>` per category of the node. */
  out: string[] | 'categories';
}

/** Every node type of the flow format, with the handles it has (docs/api.md › Flows). */
const NODE_TYPES: Readonly<Record<string, NodeType>> = {
  agent: { role: 'agent', in: ['llm_in', 'tts_in', 'stt_in', 'tools_in'], out: ['output'] },
  // The older serialization: a `framework` node where `agent` would be, plus a `persona` node with its params.
  framework: { role: 'agent', in: ['llm_in', 'tts_in', 'stt_in', 'tools_in', 'persona_in'], out: ['output'] },
  persona: { role: 'persona', in: [], out: ['output'] },
  llm: { role: 'provider', in: [], out: ['output'] },
  tts: { role: 'provider', in: [], out: ['output'] },
  stt: { role: 'provider', in: [], out: ['output'] },
  mcp: { role: 'tool', in: [], out: ['output'] },
  start: { role: 'step', in: ['in'], out: ['output'] },
  burst: { role: 'step', in: ['in'], out: ['output'] },
  opentalk: { role: 'step', in: ['in'], out: ['output'] },
  timer: { role: 'step', in: ['in'], out: ['output'] },
  ifelse: { role: 'step', in: ['in', 'llm_in'], out: ['true', 'false'] },
  categorize: { role: 'step', in: ['in', 'llm_in'], out: 'categories' },
  transfer: { role: 'step', in: ['in'], out: [] },
  end: { role: 'step', in: ['in'], out: ['output'] },
  structured_output: { role: 'post', in: ['in', 'llm_in'], out: ['output'] },
  webhook: { role: 'post', in: ['in'], out: [] },
};

export const nodeTypeOf = (nodeType: string): NodeType | undefined =>
  Object.hasOwn(NODE_TYPES, nodeType) ? NODE_TYPES[nodeType] : undefined;

export type ModelKind = 'llm' | 'tts' | 'stt';

/** The kind of model a node of this type is (its provider runs it), or undefined for any other node. */
export const modelKindOf = (nodeType: string): ModelKind | undefined =>
  nodeTypeOf(nodeType)?.role === 'provider' ? (nodeType as ModelKind) : undefined;

/** Which node type may feed each typed input handle; `in` takes anything else that may connect. */
const FEEDS: Readonly<Record<string, string>> = {
  llm_in: 'llm',
  tts_in: 'tts',
  stt_in: 'stt',
  tools_in: 'mcp',
  persona_in: 'persona',
};

const PROVIDER_KINDS = new Set(Object.values(FEEDS));

/** Whether a node of `kind` could feed input `handle`. */
export const feedable = (handle: string, kind: string): boolean =>
  FEEDS[handle] ? FEEDS[handle] === kind : !PROVIDER_KINDS.has(kind);

export const CATEGORY_HANDLE = /^cat_(\d+)$/;

/** The steps that decide where the run goes next by asking a model: a step, or its kind. */
export function isBranch(step: Step | undefined): step is BranchStep;
export function isBranch(kind: string | undefined): kind is BranchStep['kind'];
export function isBranch(x: Step | string | undefined): boolean {
  const kind = typeof x === 'string' ? x : x?.kind;
  return kind === 'ifelse' || kind === 'categorize';
}

/** The steps a conversation ends (or leaves the flow) at. */
export const isTerminal = (kind: string | undefined): kind is 'end' | 'transfer' =>
  kind === 'end' || kind === 'transfer';

export type { StepKind };
