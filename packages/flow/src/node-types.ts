import type { BranchStep, Step, StepKind } from './types.js';

export type Role = 'agent' | 'persona' | 'provider' | 'tool' | 'step' | 'post';

export interface NodeType {
  role: Role;
  in: string[];
  /** The output handles; `categories`: one `cat_<i>` per category of the node. */
  out: string[] | 'categories';
  /** What the node is and what it does at run time: the flow reference (docs/flow-reference.md) prints it. */
  description: string;
}

/**
 * Every node type of the flow format, with the handles it has and what it does; `npm run generate` writes the
 * flow reference (docs/flow-reference.md) and the API document's node schemas from this table and PARAMS.
 */
const NODE_TYPES: Readonly<Record<string, NodeType>> = {
  agent: {
    role: 'agent',
    in: ['llm_in', 'tts_in', 'stt_in', 'tools_in'],
    out: ['output'],
    description:
      'The one central node: who the agent is. Its `output` goes to the `start` step. At run time the ' +
      "agent's system prompt is its `instructions` plus the current step's `command`, and changes when the " +
      'step does.',
  },
  framework: {
    role: 'agent',
    in: ['llm_in', 'tts_in', 'stt_in', 'tools_in', 'persona_in'],
    out: ['output'],
    description:
      'The older serialization of `agent`: a `framework` node (`provider: "livekit"`) with a `persona` node ' +
      'on `persona_in` holding the name, instructions and language. Read as the same thing.',
  },
  persona: {
    role: 'persona',
    in: [],
    out: ['output'],
    description:
      "Who the agent is, for a `framework` node (its `output` goes to the framework's `persona_in`).",
  },
  llm: {
    role: 'provider',
    in: [],
    out: ['output'],
    description:
      "A language model: on the agent's `llm_in` it is the agent's; on a branch's or structured output's " +
      "`llm_in`, that step uses it instead of the agent's.",
  },
  tts: {
    role: 'provider',
    in: [],
    out: ['output'],
    description: "Speech synthesis, on the agent's `tts_in` (voice sessions; text sessions do not call it).",
  },
  stt: {
    role: 'provider',
    in: [],
    out: ['output'],
    description:
      "Speech recognition, on the agent's `stt_in` (voice sessions; text sessions do not call it).",
  },
  mcp: {
    role: 'tool',
    in: [],
    out: ['output'],
    description:
      "Tools from an MCP server (streamable HTTP), on the agent's `tools_in` (many may connect): the agent " +
      'may call the selected tools in any step.',
  },
  start: {
    role: 'step',
    in: ['in'],
    out: ['output'],
    description:
      'The first step. On session start the agent speaks first: `command` verbatim when `isLiteral`, else a ' +
      'line generated from it. The first user turn moves on.',
  },
  burst: {
    role: 'step',
    in: ['in'],
    out: ['output'],
    description:
      'A number of exchanges: each user turn completes a round; after `rounds` rounds the run moves on.',
  },
  opentalk: {
    role: 'step',
    in: ['in'],
    out: ['output'],
    description:
      'Free talk. When the next step is an `ifelse`/`categorize`, that branch is evaluated on every user ' +
      'turn and the run moves when it picks an exit other than "stay"; otherwise the agent moves on by ' +
      'calling the step-completion tool the runtime gives it.',
  },
  timer: {
    role: 'step',
    in: ['in'],
    out: ['output'],
    description:
      'Talk for a while: the run moves on at the first user turn after `duration` seconds have passed since ' +
      'the step began (the agent is never cut off).',
  },
  ifelse: {
    role: 'step',
    in: ['in', 'llm_in'],
    out: ['true', 'false'],
    description:
      "A yes/no branch: entered, a model (its own on `llm_in`, else the agent's) judges `conditionText` over " +
      'the transcript so far and the run takes the `true` or `false` exit. A failed evaluation is retried ' +
      'once, then `false` is taken. Not right after `start` (nothing to judge yet).',
  },
  categorize: {
    role: 'step',
    in: ['in', 'llm_in'],
    out: 'categories',
    description:
      'An n-way branch: a model picks one of `categories` over the transcript so far, and the run takes ' +
      'its exit `cat_<i>` (`cat_0` for the first category). A failed evaluation is retried once, then the ' +
      'last category (conventionally "other") is taken.',
  },
  transfer: {
    role: 'step',
    in: ['in'],
    out: [],
    description:
      'Hands off: to another agent (`targetAgentId`), the session goes on with its flow (its agent node and ' +
      'start step); to a phone number (`targetNumber`, a phone call only), Twilio dials it and the call ends ' +
      '`transferred`. One of the two is set. A missing or archived agent, a number on a call that is not a ' +
      'phone call, or a hand-over Twilio refuses: the agent apologizes and the session ends.',
  },
  end: {
    role: 'step',
    in: ['in'],
    out: ['output'],
    description:
      'Says goodbye (`command`, verbatim when `isLiteral`), closes the session once it has been spoken, ' +
      'then runs the post-processing chained on its `output`.',
  },
  structured_output: {
    role: 'post',
    in: ['in', 'llm_in'],
    out: ['output'],
    description:
      "After the end: a model (its own on `llm_in`, else the agent's) extracts JSON with `schemaFields` " +
      'from the conversation; a `webhook` on its `output` receives it.',
  },
  webhook: {
    role: 'post',
    in: ['in'],
    out: [],
    description:
      'After the end (or after `structured_output`): POSTs `{ conversation, structuredOutput? }` to `url`. ' +
      'A failure is logged and never breaks the session.',
  },
};

/** What each handle takes or gives, for the flow reference. */
export const HANDLES: Readonly<Record<string, string>> = {
  in: 'the step (or end) before this one',
  output: 'to the next step; from a model, tools or persona node: to the handle that takes it',
  llm_in: 'an `llm` node (one)',
  tts_in: 'a `tts` node (one)',
  stt_in: 'an `stt` node (one)',
  tools_in: '`mcp` nodes (many)',
  persona_in: 'a `persona` node (one)',
  true: 'where the run goes when the condition holds',
  false: 'where the run goes when it does not',
  'cat_<i>': 'one exit per category, `cat_0` for the first',
};

/** Every node type, in the table's order. */
export const nodeTypes = (): [string, NodeType][] => Object.entries(NODE_TYPES);

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
