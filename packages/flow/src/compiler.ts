import type { Flow, SimpleEdge, SimpleNode } from '@vab/contracts';
import { CATEGORY_HANDLE, feedable, isBranch, isTerminal, nodeTypeOf, type NodeType } from './node-types.js';
import { PARAMS, readParams, type ParamsOf } from './params.js';
import type {
  CompiledFlow,
  CompileResult,
  FlowIssue,
  FlowIssueCode,
  LlmConfig,
  McpConfig,
  PostStep,
  Step,
  SttConfig,
  TtsConfig,
  TurnSettings,
} from './types.js';

/** A node as the compiler reads it: its type a string ('' when the builder sent none). */
type Node = SimpleNode & { nodeType: string };
/** An edge that passed the checks, with both handles named, and its place in `edges`. */
interface Edge {
  source: string;
  sourceHandle: string;
  target: string;
  targetHandle: string;
  index: number;
}

/** The graph as the phases share it, and the issues they find. */
class Graph {
  readonly issues: FlowIssue[] = [];
  readonly nodes = new Map<string, Node>();
  readonly edges: Edge[] = [];

  constructor(readonly list: Node[]) {}

  add(code: FlowIssueCode, message: string, where: { nodeId?: string; edgeIndex?: number } = {}): void {
    this.issues.push({ code, message, ...where });
  }

  params<K extends keyof typeof PARAMS>(node: Node, kind: K): ParamsOf<K> {
    const { params, issues } = readParams(node, kind, node.nodeType);
    this.issues.push(...issues);
    return params;
  }

  from(id: string, handle?: string): Edge[] {
    return this.edges.filter((e) => e.source === id && (handle === undefined || e.sourceHandle === handle));
  }

  into(id: string, handle: string): Edge[] {
    return this.edges.filter((e) => e.target === id && e.targetHandle === handle);
  }

  ofRole(role: NodeType['role']): Node[] {
    return this.list.filter((n) => nodeTypeOf(n.nodeType)?.role === role);
  }
}

function outHandles(t: NodeType, node: SimpleNode): string[] {
  if (t.out !== 'categories') return t.out;
  const cats = node.categories;
  return Array.isArray(cats) ? cats.map((_, i) => `cat_${i}`) : [];
}

/** The handle a side has when it has exactly one; '' (no such handle) when it has none or several. */
const onlyOne = (handles: string[]) => (handles.length === 1 ? handles[0]! : '');

// ---- phase 1: the nodes ----

function readNodes(flow: Flow): Graph {
  const g = new Graph(
    flow.nodes.map((n) => ({ ...n, nodeType: typeof n.nodeType === 'string' ? n.nodeType : '' })),
  );
  for (const n of g.list) {
    if (g.nodes.has(n.id)) g.add('DUPLICATE_NODE_ID', `two nodes share the id ${n.id}`, { nodeId: n.id });
    g.nodes.set(n.id, n);
    if (!nodeTypeOf(n.nodeType)) {
      const what = n.nodeType === '' ? `node ${n.id} has no nodeType` : `unknown node type "${n.nodeType}"`;
      g.add('UNKNOWN_NODE_TYPE', what, { nodeId: n.id });
    }
  }
  return g;
}

// ---- phase 2: the edges — endpoints, handles, and which kinds may connect ----

function kindsConnect(src: Node, st: NodeType, dst: Node, dt: NodeType, targetHandle: string): boolean {
  if (targetHandle !== 'in') return feedable(targetHandle, src.nodeType);
  if (dt.role === 'step') {
    return dst.nodeType === 'start' ? st.role === 'agent' : st.role === 'step' && !isTerminal(src.nodeType);
  }
  if (dt.role === 'post') {
    return src.nodeType === 'end' || (src.nodeType === 'structured_output' && dst.nodeType === 'webhook');
  }
  return false;
}

function readEdge(g: Graph, edge: SimpleEdge, index: number): void {
  const src = g.nodes.get(edge.source);
  const dst = g.nodes.get(edge.target);
  if (!src || !dst) {
    const missing = !src ? edge.source : edge.target;
    g.add('EDGE_UNKNOWN_NODE', `edge ${index + 1} connects to a node that does not exist (${missing})`, {
      edgeIndex: index,
    });
    return;
  }
  const st = nodeTypeOf(src.nodeType);
  const dt = nodeTypeOf(dst.nodeType);
  if (!st || !dt) return; // already reported as an unknown node type
  // a canvas leaves a handle unnamed (null or absent) where the side has one the edge can mean
  const e: Edge = {
    source: edge.source,
    target: edge.target,
    sourceHandle: edge.sourceHandle ?? onlyOne(outHandles(st, src)),
    targetHandle: edge.targetHandle ?? onlyOne(dt.in.filter((h) => feedable(h, src.nodeType))),
    index,
  };
  const outputs = outHandles(st, src);
  if (
    !outputs.includes(e.sourceHandle) &&
    !(st.out === 'categories' && CATEGORY_HANDLE.test(e.sourceHandle))
  ) {
    const what =
      e.sourceHandle === ''
        ? `edge ${index + 1} names none of its outputs`
        : `has no output "${e.sourceHandle}"`;
    g.add('EDGE_UNKNOWN_HANDLE', `${src.nodeType} ${src.id}: ${what}`, { edgeIndex: index, nodeId: src.id });
    return;
  }
  if (!dt.in.includes(e.targetHandle)) {
    const what =
      e.targetHandle === ''
        ? `edge ${index + 1} names none of its inputs`
        : `has no input "${e.targetHandle}"`;
    g.add('EDGE_UNKNOWN_HANDLE', `${dst.nodeType} ${dst.id}: ${what}`, { edgeIndex: index, nodeId: dst.id });
    return;
  }
  if (!kindsConnect(src, st, dst, dt, e.targetHandle)) {
    const what = `a ${src.nodeType} cannot connect to the "${e.targetHandle}" input of a ${dst.nodeType}`;
    g.add('EDGE_WRONG_KIND', what, { edgeIndex: index });
    return;
  }
  g.edges.push(e);
}

// ---- phase 3: the agent, its models and tools ----

/** The turn settings an agent node may name (a phone call replaces the defaults of the others). */
const TURN_KEYS = [
  'allowInterruptions',
  'turnDetection',
  'minEndpointingDelay',
  'maxEndpointingDelay',
  'minInterruptionDuration',
  'minInterruptionWords',
  'falseInterruptionTimeout',
  'resumeFalseInterruption',
  'preemptiveGeneration',
] as const satisfies readonly (keyof TurnSettings)[];

function readAgent(g: Graph): { node: Node | undefined; agent: CompiledFlow['agent'] } {
  const agents = g.ofRole('agent');
  if (agents.length === 0) g.add('NO_AGENT', 'the flow needs one agent node');
  for (const extra of agents.slice(1)) {
    g.add('MULTIPLE_AGENTS', 'the flow has more than one agent node', { nodeId: extra.id });
  }
  const node = agents[0];
  if (!node) return { node, agent: { id: '', ...PARAMS.agent.parse({}) } };
  const agent =
    node.nodeType === 'framework'
      ? // the older serialization: who the agent is lives on a `persona` node
        {
          id: node.id,
          ...g.params(g.list.find((n) => n.nodeType === 'persona') ?? node, 'persona'),
          ...g.params(node, 'framework'),
        }
      : { id: node.id, ...g.params(node, 'agent') };
  const turnSet = TURN_KEYS.filter((k) => node[k] !== undefined && node[k] !== null && node[k] !== '');
  if (turnSet.length > 0) Object.assign(agent, { turnSet });
  if (agent.maxEndpointingDelay < agent.minEndpointingDelay) {
    g.add('PARAM_OUT_OF_RANGE', '`maxEndpointingDelay` must be at least `minEndpointingDelay`', {
      nodeId: node.id,
    });
  }
  return { node, agent };
}

/** The provider node on one of a node's model inputs (one connection at the most). */
function providerOn(
  g: Graph,
  nodeId: string,
  handle: 'llm_in' | 'tts_in' | 'stt_in',
  required?: FlowIssueCode,
) {
  const edges = g.into(nodeId, handle);
  if (edges.length > 1) {
    g.add('HANDLE_TAKEN', `${handle} takes one connection, it has ${edges.length}`, { nodeId });
  }
  if (edges.length === 0 && required)
    g.add(required, `connect a ${handle.slice(0, 3)} node to ${handle}`, { nodeId });
  return edges[0] ? g.nodes.get(edges[0].source) : undefined;
}

function llmOf(g: Graph, n: Node | undefined): LlmConfig | undefined {
  return n ? { nodeId: n.id, ...g.params(n, 'llm') } : undefined;
}

function ttsOf(g: Graph, n: Node | undefined): TtsConfig | undefined {
  if (!n) return undefined;
  const { id: _id, nodeType: _t, provider: _p, model: _m, voiceId: _v, baseURL: _u, ...extras } = n;
  return { nodeId: n.id, ...g.params(n, 'tts'), extras };
}

function sttOf(g: Graph, n: Node | undefined): SttConfig | undefined {
  return n ? { nodeId: n.id, ...g.params(n, 'stt') } : undefined;
}

function readTools(g: Graph, agentId: string): McpConfig[] {
  return g
    .into(agentId, 'tools_in')
    .map((e) => ({ nodeId: e.source, ...g.params(g.nodes.get(e.source)!, 'mcp') }));
}

// ---- phase 4: the steps ----

/** The one step a step's output leads to (reported when none or several). */
function single(g: Graph, n: Node, handle: string, missing: FlowIssueCode): string {
  const edges = g.from(n.id, handle);
  if (edges.length === 0) {
    const what =
      missing === 'MISSING_NEXT'
        ? `${n.nodeType} ${n.id} leads nowhere: connect its output`
        : `exit "${handle}" of ${n.nodeType} ${n.id} is not connected`;
    g.add(missing, what, { nodeId: n.id });
  }
  if (edges.length > 1) {
    const what = `output "${handle}" of ${n.nodeType} ${n.id} has ${edges.length} connections; it takes one`;
    g.add('MULTIPLE_NEXT', what, { nodeId: n.id });
  }
  return edges[0]?.target ?? '';
}

const next = (g: Graph, n: Node) => single(g, n, 'output', 'MISSING_NEXT');
const branchLlm = (g: Graph, n: Node) => llmOf(g, providerOn(g, n.id, 'llm_in'));

/** What runs after an end step, structured output first so a webhook can carry it. */
function postOf(g: Graph, endId: string): PostStep[] {
  const steps: PostStep[] = [];
  const seen = new Set<string>();
  const visit = (id: string) => {
    for (const e of g.from(id, 'output')) {
      if (seen.has(e.target)) continue;
      seen.add(e.target);
      const n = g.nodes.get(e.target)!;
      if (n.nodeType === 'structured_output') {
        steps.push({
          kind: 'structured_output',
          id: n.id,
          ...g.params(n, 'structured_output'),
          llm: branchLlm(g, n),
        });
        visit(n.id);
      } else {
        steps.push({ kind: 'webhook', id: n.id, ...g.params(n, 'webhook') });
      }
    }
  };
  visit(endId);
  return [
    ...steps.filter((s) => s.kind === 'structured_output'),
    ...steps.filter((s) => s.kind === 'webhook'),
  ];
}

/** A transfer names one target: an agent (`targetAgentId`) or a phone number (`targetNumber`). */
function transferStep(g: Graph, n: Node): Step {
  const { targetAgentId, targetNumber } = g.params(n, 'transfer');
  const number = blankToUndefined(n.targetNumber);
  if (targetAgentId && number !== undefined)
    g.add('PARAM_OUT_OF_RANGE', 'transfer takes `targetAgentId` or `targetNumber`, not both', {
      nodeId: n.id,
    });
  if (targetNumber && !targetAgentId) return { kind: 'transfer', id: n.id, targetNumber };
  // a number set wrong is reported by its param; neither set at all is a missing target (named without the
  // params' quotes: neither param is required on its own, as the flow reference says)
  if (!targetAgentId && number === undefined)
    g.add(
      'PARAM_MISSING',
      'transfer needs a target: an agent (targetAgentId) or a phone number (targetNumber)',
      {
        nodeId: n.id,
      },
    );
  return { kind: 'transfer', id: n.id, targetAgentId: targetAgentId ?? '' };
}

const blankToUndefined = (v: unknown) => (v === '' || v === null || v === undefined ? undefined : v);

function categorizeStep(g: Graph, n: Node): Step {
  const { command, categories } = g.params(n, 'categorize');
  for (const e of g.from(n.id)) {
    const m = CATEGORY_HANDLE.exec(e.sourceHandle);
    if (!m || Number(m[1]) >= categories.length) {
      const what = `exit "${e.sourceHandle}" has no category (there are ${categories.length})`;
      g.add('CATEGORY_HANDLES_MISMATCH', what, { nodeId: n.id, edgeIndex: e.index });
    }
  }
  const exits = categories.map((_, i) => single(g, n, `cat_${i}`, 'BRANCH_EXIT_UNCONNECTED'));
  return { kind: 'categorize', id: n.id, command, categories, llm: branchLlm(g, n), exits };
}

/** Each step kind: its params, and where it leads. */
const STEP_READERS: Record<Step['kind'], (g: Graph, n: Node) => Step> = {
  start: (g, n) => ({ kind: 'start', id: n.id, ...g.params(n, 'start'), next: next(g, n) }),
  burst: (g, n) => ({ kind: 'burst', id: n.id, ...g.params(n, 'burst'), next: next(g, n) }),
  opentalk: (g, n) => ({ kind: 'opentalk', id: n.id, ...g.params(n, 'opentalk'), next: next(g, n) }),
  timer: (g, n) => {
    const { command, duration } = g.params(n, 'timer');
    return { kind: 'timer', id: n.id, command, durationMs: duration * 1000, next: next(g, n) };
  },
  ifelse: (g, n) => ({
    kind: 'ifelse',
    id: n.id,
    ...g.params(n, 'ifelse'),
    llm: branchLlm(g, n),
    exits: {
      true: single(g, n, 'true', 'BRANCH_EXIT_UNCONNECTED'),
      false: single(g, n, 'false', 'BRANCH_EXIT_UNCONNECTED'),
    },
  }),
  categorize: categorizeStep,
  transfer: transferStep,
  end: (g, n) => ({ kind: 'end', id: n.id, ...g.params(n, 'end'), post: postOf(g, n.id) }),
};

function readSteps(
  g: Graph,
  agentNode: Node | undefined,
): { steps: Record<string, Step>; start: Node | undefined } {
  const stepNodes = g.ofRole('step');
  const starts = stepNodes.filter((n) => n.nodeType === 'start');
  if (starts.length === 0) g.add('NO_START', 'the flow needs one start step');
  for (const extra of starts.slice(1)) {
    g.add('MULTIPLE_STARTS', 'the flow has more than one start step', { nodeId: extra.id });
  }
  const start = starts[0];
  if (agentNode && start && !g.from(agentNode.id, 'output').some((e) => e.target === start.id)) {
    g.add('AGENT_NOT_CONNECTED_TO_START', "connect the agent's output to the start step", {
      nodeId: agentNode.id,
    });
  }
  const steps: Record<string, Step> = {};
  for (const n of stepNodes) steps[n.id] = STEP_READERS[n.nodeType as Step['kind']](g, n);
  return { steps, start };
}

// ---- phase 5: the shape of the step graph ----

const nextOf = (s: Step): string[] =>
  s.kind === 'ifelse'
    ? [s.exits.true, s.exits.false]
    : s.kind === 'categorize'
      ? s.exits
      : 'next' in s
        ? [s.next]
        : [];

function reachableFrom(steps: Record<string, Step>, startId: string): Set<string> {
  const reachable = new Set<string>([startId]);
  const queue = [startId];
  while (queue.length) {
    for (const n of nextOf(steps[queue.shift()!]!)) {
      if (n && steps[n] && !reachable.has(n)) {
        reachable.add(n);
        queue.push(n);
      }
    }
  }
  return reachable;
}

/** The steps from which an end or a transfer can be reached: a fixed point over the graph (cycles allowed). */
function withExit(steps: Record<string, Step>): Set<string> {
  const exits = new Set(
    Object.values(steps)
      .filter((s) => isTerminal(s.kind))
      .map((s) => s.id),
  );
  for (let grew = true; grew;) {
    grew = false;
    for (const s of Object.values(steps)) {
      if (!exits.has(s.id) && nextOf(s).some((n) => exits.has(n))) {
        exits.add(s.id);
        grew = true;
      }
    }
  }
  return exits;
}

function checkShape(g: Graph, steps: Record<string, Step>, start: Node | undefined): void {
  if (start && steps[start.id]) {
    const first = steps[(steps[start.id] as { next: string }).next];
    if (first && isBranch(first.kind)) {
      const what = `a ${first.kind} cannot come right after start: there is no conversation to judge yet`;
      g.add('BRANCH_AFTER_START', what, { nodeId: first.id });
    }
    const reachable = reachableFrom(steps, start.id);
    for (const s of Object.values(steps)) {
      if (!reachable.has(s.id))
        g.add('UNREACHABLE_STEP', `${s.kind} ${s.id} cannot be reached from start`, { nodeId: s.id });
    }
    const exits = withExit(steps);
    for (const id of reachable) {
      const s = steps[id]!;
      if (!exits.has(id) && nextOf(s).every((n) => n !== '')) {
        g.add('NO_EXIT_PATH', `no end or transfer can be reached from ${s.kind} ${id}`, { nodeId: id });
      }
    }
  }
  const chained = new Set(
    Object.values(steps).flatMap((s) => (s.kind === 'end' ? s.post.map((p) => p.id) : [])),
  );
  for (const n of g.ofRole('post')) {
    if (!chained.has(n.id)) {
      g.add('UNREACHABLE_STEP', `${n.nodeType} ${n.id} runs only when chained after an end step`, {
        nodeId: n.id,
      });
    }
  }
}

/**
 * Compiles a builder graph into a runnable config, or reports every problem at once — each with a stable
 * code, a message a builder can show, and the node or edge it concerns. Never throws on a draft.
 */
export function compile(flow: Flow): CompileResult {
  const g = readNodes(flow);
  flow.edges.forEach((e, index) => readEdge(g, e, index));
  const { node: agentNode, agent } = readAgent(g);
  const llm = agentNode ? llmOf(g, providerOn(g, agentNode.id, 'llm_in', 'MISSING_LLM')) : undefined;
  const tts = agentNode ? ttsOf(g, providerOn(g, agentNode.id, 'tts_in', 'MISSING_TTS')) : undefined;
  const stt = agentNode ? sttOf(g, providerOn(g, agentNode.id, 'stt_in', 'MISSING_STT')) : undefined;
  const tools = agentNode ? readTools(g, agentNode.id) : [];
  const { steps, start } = readSteps(g, agentNode);
  checkShape(g, steps, start);
  if (g.issues.length > 0 || !llm || !tts || !stt || !start) return { ok: false, issues: g.issues };
  return { ok: true, config: { agent, providers: { llm, tts, stt }, tools, startStepId: start.id, steps } };
}
