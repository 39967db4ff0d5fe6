import type { Flow, SimpleEdge, SimpleNode } from '@vab/contracts';
import type {
  CompiledFlow,
  CompileResult,
  FlowIssue,
  FlowIssueCode,
  LlmConfig,
  McpConfig,
  PostStep,
  SchemaField,
  SchemaFieldType,
  Step,
  SttConfig,
  TtsConfig,
} from './types.js';

type Role = 'agent' | 'persona' | 'provider' | 'tool' | 'step' | 'post';

interface NodeType {
  role: Role;
  in: string[];
  out: string[] | 'categories';
}

/** Every node type of the flow format, with the handles it has (shared/spec/flow-format.md). */
const NODE_TYPES: Record<string, NodeType> = {
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

/** Which node type may feed each typed input handle. */
const FEEDS: Record<string, string> = {
  llm_in: 'llm',
  tts_in: 'tts',
  stt_in: 'stt',
  tools_in: 'mcp',
  persona_in: 'persona',
};

const BRANCH = new Set(['ifelse', 'categorize']);
const TERMINAL = new Set(['end', 'transfer']);
const CATEGORY_HANDLE = /^cat_(\d+)$/;
const SCHEMA_TYPES = new Set<SchemaFieldType>(['string', 'int', 'float', 'boolean', 'list', 'enum']);
const MAX_CATEGORIES = 20;

class Collector {
  readonly issues: FlowIssue[] = [];
  add(code: FlowIssueCode, message: string, where: { nodeId?: string; edgeIndex?: number } = {}): void {
    this.issues.push({ code, message, ...where });
  }
}

/** Reads one param with a type and range, reporting (not throwing) what is wrong. */
class Params {
  constructor(
    private readonly node: SimpleNode,
    private readonly out: Collector,
  ) {}

  private raw(key: string): unknown {
    return (this.node as Record<string, unknown>)[key];
  }

  str(key: string, opts: { required?: boolean; def?: string; max?: number } = {}): string {
    const v = this.raw(key);
    if (v === undefined || v === null || v === '') {
      if (opts.required)
        this.out.add('PARAM_MISSING', `${this.node.nodeType} needs \`${key}\``, { nodeId: this.node.id });
      return opts.def ?? '';
    }
    if (typeof v !== 'string') {
      this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` must be text`, { nodeId: this.node.id });
      return opts.def ?? '';
    }
    if (opts.max !== undefined && v.length > opts.max) {
      this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` must be at most ${opts.max} characters`, {
        nodeId: this.node.id,
      });
    }
    return v;
  }

  bool(key: string, def: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined || v === null) return def;
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` must be true or false`, { nodeId: this.node.id });
    return def;
  }

  /** Numbers may arrive as strings from form inputs; both are accepted when they parse. */
  num(
    key: string,
    opts: { min: number; max: number; int?: boolean; def?: number; unit?: string },
  ): number | undefined {
    const v = this.raw(key);
    if (v === undefined || v === null || v === '') return opts.def;
    const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
    const kind = opts.int ? 'a whole number' : 'a number';
    if (!Number.isFinite(n) || (opts.int && !Number.isInteger(n)) || n < opts.min || n > opts.max) {
      this.out.add(
        'PARAM_OUT_OF_RANGE',
        `\`${key}\` must be ${kind} from ${opts.min} to ${opts.max}${opts.unit ? ` ${opts.unit}` : ''}`,
        { nodeId: this.node.id },
      );
      return opts.def;
    }
    return n;
  }

  url(key: string, required: boolean): string {
    const v = this.str(key, { required });
    if (v === '') return v;
    try {
      const u = new URL(v);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    } catch {
      this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` must be an http(s) URL`, { nodeId: this.node.id });
    }
    return v;
  }

  strings(key: string, opts: { required?: boolean; max?: number } = {}): string[] {
    const v = this.raw(key);
    if (v === undefined || v === null) {
      if (opts.required)
        this.out.add('PARAM_MISSING', `${this.node.nodeType} needs \`${key}\``, { nodeId: this.node.id });
      return [];
    }
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && x.trim() !== '')) {
      this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` must be a list of non-empty texts`, {
        nodeId: this.node.id,
      });
      return [];
    }
    if (opts.required && v.length === 0) {
      this.out.add('PARAM_MISSING', `\`${key}\` must not be empty`, { nodeId: this.node.id });
    }
    if (opts.max !== undefined && v.length > opts.max) {
      this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` may hold at most ${opts.max} entries`, {
        nodeId: this.node.id,
      });
    }
    return v as string[];
  }

  record(key: string): Record<string, string> {
    const v = this.raw(key);
    if (v === undefined || v === null) return {};
    if (typeof v !== 'object' || Array.isArray(v) || !Object.values(v).every((x) => typeof x === 'string')) {
      this.out.add('PARAM_OUT_OF_RANGE', `\`${key}\` must map names to texts`, { nodeId: this.node.id });
      return {};
    }
    return v as Record<string, string>;
  }

  schemaFields(key: string): SchemaField[] {
    const v = this.raw(key);
    if (!Array.isArray(v) || v.length === 0) {
      this.out.add('PARAM_MISSING', `${this.node.nodeType} needs at least one field in \`${key}\``, {
        nodeId: this.node.id,
      });
      return [];
    }
    const seen = new Set<string>();
    const fields: SchemaField[] = [];
    v.forEach((f: unknown, i) => {
      const field = (f ?? {}) as Record<string, unknown>;
      const name = field.name;
      const type = field.type as SchemaFieldType;
      if (typeof name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name) || seen.has(name)) {
        this.out.add('PARAM_OUT_OF_RANGE', `field ${i + 1} needs a unique name of letters, digits and _`, {
          nodeId: this.node.id,
        });
        return;
      }
      seen.add(name);
      if (!SCHEMA_TYPES.has(type)) {
        this.out.add(
          'PARAM_OUT_OF_RANGE',
          `field \`${name}\` has no valid type (string, int, float, boolean, list, enum)`,
          { nodeId: this.node.id },
        );
        return;
      }
      const options = field.options;
      if (
        type === 'enum' &&
        (!Array.isArray(options) || options.length === 0 || !options.every((o) => typeof o === 'string'))
      ) {
        this.out.add('PARAM_OUT_OF_RANGE', `enum field \`${name}\` needs its options`, {
          nodeId: this.node.id,
        });
        return;
      }
      fields.push({
        name,
        type,
        description: typeof field.description === 'string' ? field.description : undefined,
        options: type === 'enum' ? (options as string[]) : undefined,
      });
    });
    return fields;
  }
}

/** A node as the compiler reads it: its type a string ('' when the builder sent none). */
type TypedNode = SimpleNode & { nodeType: string };
/** An edge with both handles named. */
type TypedEdge = Pick<SimpleEdge, 'source' | 'target'> & { sourceHandle: string; targetHandle: string };

const typed = (n: SimpleNode): TypedNode => ({
  ...n,
  nodeType: typeof n.nodeType === 'string' ? n.nodeType : '',
});

const PROVIDER_KINDS = new Set(Object.values(FEEDS));
/** Whether a node of `kind` could feed input `handle`: a typed input its kind, `in` anything else. */
const feedable = (handle: string, kind: string) =>
  FEEDS[handle] ? FEEDS[handle] === kind : !PROVIDER_KINDS.has(kind);

/** The handle a side has when it has exactly one; '' (no such handle) when it has none or several. */
const onlyOne = (handles: string[]) => (handles.length === 1 ? handles[0]! : '');

function outHandles(t: NodeType, node: SimpleNode): string[] {
  if (t.out !== 'categories') return t.out;
  const cats = (node as Record<string, unknown>).categories;
  return Array.isArray(cats) ? cats.map((_, i) => `cat_${i}`) : [];
}

/**
 * Compiles a builder graph into a runnable config, or reports every problem at once — each with a stable
 * code, a message a builder can show, and the node or edge it concerns. Never throws on a draft.
 */
export function compile(stored: Flow): CompileResult {
  const out = new Collector();
  const flow = { nodes: stored.nodes.map(typed), edges: stored.edges };
  const nodes = new Map<string, TypedNode>();
  for (const n of flow.nodes) {
    if (nodes.has(n.id)) out.add('DUPLICATE_NODE_ID', `two nodes share the id ${n.id}`, { nodeId: n.id });
    nodes.set(n.id, n);
    if (!NODE_TYPES[n.nodeType])
      out.add(
        'UNKNOWN_NODE_TYPE',
        n.nodeType === '' ? `node ${n.id} has no nodeType` : `unknown node type "${n.nodeType}"`,
        { nodeId: n.id },
      );
  }

  // ---- edges: endpoints, handles, and which kinds may connect ----
  const valid: (TypedEdge & { index: number })[] = [];
  flow.edges.forEach((edge, index) => {
    const src = nodes.get(edge.source);
    const dst = nodes.get(edge.target);
    if (!src || !dst) {
      out.add(
        'EDGE_UNKNOWN_NODE',
        `edge ${index + 1} connects to a node that does not exist (${!src ? edge.source : edge.target})`,
        { edgeIndex: index },
      );
      return;
    }
    const st = NODE_TYPES[src.nodeType];
    const dt = NODE_TYPES[dst.nodeType];
    if (!st || !dt) return; // already reported as an unknown node type
    // a canvas leaves a handle unnamed (null or absent) where the side has one the edge can mean
    const e: TypedEdge = {
      source: edge.source,
      target: edge.target,
      sourceHandle: edge.sourceHandle ?? onlyOne(outHandles(st, src)),
      targetHandle: edge.targetHandle ?? onlyOne(dt.in.filter((h) => feedable(h, src.nodeType))),
    };
    if (
      !outHandles(st, src).includes(e.sourceHandle) &&
      !(st.out === 'categories' && CATEGORY_HANDLE.test(e.sourceHandle))
    ) {
      const what =
        e.sourceHandle === ''
          ? 'edge ' + (index + 1) + ' names none of its outputs'
          : `has no output "${e.sourceHandle}"`;
      out.add('EDGE_UNKNOWN_HANDLE', `${src.nodeType} ${src.id}: ${what}`, {
        edgeIndex: index,
        nodeId: src.id,
      });
      return;
    }
    if (!dt.in.includes(e.targetHandle)) {
      const what =
        e.targetHandle === ''
          ? 'edge ' + (index + 1) + ' names none of its inputs'
          : `has no input "${e.targetHandle}"`;
      out.add('EDGE_UNKNOWN_HANDLE', `${dst.nodeType} ${dst.id}: ${what}`, {
        edgeIndex: index,
        nodeId: dst.id,
      });
      return;
    }
    const feed = FEEDS[e.targetHandle];
    let ok: boolean;
    if (feed) ok = src.nodeType === feed;
    else if (dt.role === 'step') {
      ok = dst.nodeType === 'start' ? st.role === 'agent' : st.role === 'step' && !TERMINAL.has(src.nodeType);
    } else if (dt.role === 'post') {
      ok = src.nodeType === 'end' || (src.nodeType === 'structured_output' && dst.nodeType === 'webhook');
    } else ok = false;
    if (!ok) {
      out.add(
        'EDGE_WRONG_KIND',
        `a ${src.nodeType} cannot connect to the "${e.targetHandle}" input of a ${dst.nodeType}`,
        { edgeIndex: index },
      );
      return;
    }
    valid.push({ ...e, index });
  });

  const from = (id: string, handle?: string) =>
    valid.filter((e) => e.source === id && (handle === undefined || e.sourceHandle === handle));
  const into = (id: string, handle: string) =>
    valid.filter((e) => e.target === id && e.targetHandle === handle);

  // ---- the agent ----
  const agents = flow.nodes.filter((n) => NODE_TYPES[n.nodeType]?.role === 'agent');
  if (agents.length === 0) out.add('NO_AGENT', 'the flow needs one agent node');
  for (const extra of agents.slice(1))
    out.add('MULTIPLE_AGENTS', 'the flow has more than one agent node', { nodeId: extra.id });
  const agentNode = agents[0];
  const persona =
    agentNode?.nodeType === 'framework' ? flow.nodes.find((n) => n.nodeType === 'persona') : undefined;
  const agentParams = new Params(persona ?? agentNode ?? { id: '', nodeType: 'agent' }, out);
  const agent = {
    id: agentNode?.id ?? '',
    name: agentParams.str('name', { def: 'Agent', max: 200 }),
    instructions: agentParams.str('instructions', { max: 50_000 }),
    language: agentParams.str('language', { def: 'en', max: 35 }),
    allowInterruptions: agentNode ? new Params(agentNode, out).bool('allowInterruptions', true) : true,
  };
  if (agentNode && !/^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/.test(agent.language)) {
    out.add('PARAM_OUT_OF_RANGE', '`language` must be a BCP-47 tag such as en or en-US', {
      nodeId: persona?.id ?? agentNode.id,
    });
  }

  const providerOn = (
    nodeId: string,
    handle: 'llm_in' | 'tts_in' | 'stt_in',
    required: boolean,
    code: FlowIssueCode,
  ) => {
    const edges = into(nodeId, handle);
    if (edges.length > 1)
      out.add('HANDLE_TAKEN', `${handle} takes one connection, it has ${edges.length}`, { nodeId });
    if (edges.length === 0 && required)
      out.add(code, `connect a ${handle.slice(0, 3)} node to ${handle}`, { nodeId });
    return edges[0] ? nodes.get(edges[0].source) : undefined;
  };
  const llmOf = (n: SimpleNode | undefined): LlmConfig | undefined => {
    if (!n) return undefined;
    const p = new Params(n, out);
    return {
      nodeId: n.id,
      provider: p.str('provider', { required: true }),
      model: p.str('model') || undefined,
      temperature: p.num('temperature', { min: 0, max: 2 }),
      maxTokens: p.num('maxTokens', { min: 1, max: 200_000, int: true }),
      baseURL: p.url('baseURL', false) || undefined,
    };
  };
  const llmNode = agentNode ? providerOn(agentNode.id, 'llm_in', true, 'MISSING_LLM') : undefined;
  const ttsNode = agentNode ? providerOn(agentNode.id, 'tts_in', true, 'MISSING_TTS') : undefined;
  const sttNode = agentNode ? providerOn(agentNode.id, 'stt_in', true, 'MISSING_STT') : undefined;
  const llm = llmOf(llmNode);
  let tts: TtsConfig | undefined;
  if (ttsNode) {
    const p = new Params(ttsNode, out);
    const {
      id: _id,
      nodeType: _t,
      provider: _p,
      model: _m,
      voiceId: _v,
      ...extras
    } = ttsNode as Record<string, unknown>;
    tts = {
      nodeId: ttsNode.id,
      provider: p.str('provider', { required: true }),
      model: p.str('model') || undefined,
      voiceId: p.str('voiceId') || undefined,
      extras,
    };
  }
  let stt: SttConfig | undefined;
  if (sttNode) {
    const p = new Params(sttNode, out);
    stt = {
      nodeId: sttNode.id,
      provider: p.str('provider', { required: true }),
      model: p.str('model') || undefined,
      language: p.str('language') || undefined,
      keyterms:
        (sttNode as Record<string, unknown>).keyterms === undefined ? undefined : p.strings('keyterms'),
    };
  }
  const tools: McpConfig[] = agentNode
    ? into(agentNode.id, 'tools_in').map((e) => {
        const n = nodes.get(e.source)!;
        const p = new Params(n, out);
        const authType = p.str('authType', { def: 'none' });
        if (!['none', 'bearer', 'api_key'].includes(authType)) {
          out.add('PARAM_OUT_OF_RANGE', '`authType` must be none, bearer or api_key', { nodeId: n.id });
        }
        return {
          nodeId: n.id,
          serverUrl: p.url('serverUrl', true),
          authType: authType as McpConfig['authType'],
          authValue: p.str('authValue') || undefined,
          selectedTools: p.strings('selectedTools'),
        };
      })
    : [];

  // ---- steps ----
  const stepNodes = flow.nodes.filter((n) => NODE_TYPES[n.nodeType]?.role === 'step');
  const starts = stepNodes.filter((n) => n.nodeType === 'start');
  if (starts.length === 0) out.add('NO_START', 'the flow needs one start step');
  for (const extra of starts.slice(1))
    out.add('MULTIPLE_STARTS', 'the flow has more than one start step', { nodeId: extra.id });
  const start = starts[0];
  if (agentNode && start && !from(agentNode.id, 'output').some((e) => e.target === start.id)) {
    out.add('AGENT_NOT_CONNECTED_TO_START', "connect the agent's output to the start step", {
      nodeId: agentNode.id,
    });
  }

  const single = (n: SimpleNode, handle: string, missing: FlowIssueCode): string => {
    const edges = from(n.id, handle);
    if (edges.length === 0) {
      out.add(
        missing,
        missing === 'MISSING_NEXT'
          ? `${n.nodeType} ${n.id} leads nowhere: connect its output`
          : `exit "${handle}" of ${n.nodeType} ${n.id} is not connected`,
        { nodeId: n.id },
      );
    }
    if (edges.length > 1)
      out.add(
        'MULTIPLE_NEXT',
        `output "${handle}" of ${n.nodeType} ${n.id} has ${edges.length} connections; it takes one`,
        { nodeId: n.id },
      );
    return edges[0]?.target ?? '';
  };
  const branchLlm = (n: SimpleNode) => llmOf(providerOn(n.id, 'llm_in', false, 'MISSING_LLM'));

  const postOf = (endId: string): PostStep[] => {
    const outs: PostStep[] = [];
    const visit = (id: string, seen: Set<string>) => {
      for (const e of from(id, 'output')) {
        if (seen.has(e.target)) continue;
        seen.add(e.target);
        const n = nodes.get(e.target)!;
        const p = new Params(n, out);
        if (n.nodeType === 'structured_output') {
          outs.push({
            kind: 'structured_output',
            id: n.id,
            command: p.str('command'),
            schemaFields: p.schemaFields('schemaFields'),
            llm: branchLlm(n),
          });
          visit(n.id, seen);
        } else {
          outs.push({ kind: 'webhook', id: n.id, url: p.url('url', true), headers: p.record('headers') });
        }
      }
    };
    visit(endId, new Set());
    // structured output first, so a webhook can carry it
    return [
      ...outs.filter((s) => s.kind === 'structured_output'),
      ...outs.filter((s) => s.kind === 'webhook'),
    ];
  };

  const steps: Record<string, Step> = {};
  for (const n of stepNodes) {
    const p = new Params(n, out);
    switch (n.nodeType) {
      case 'start':
        steps[n.id] = {
          kind: 'start',
          id: n.id,
          command: p.str('command', { required: true }),
          isLiteral: p.bool('isLiteral', false),
          next: single(n, 'output', 'MISSING_NEXT'),
        };
        break;
      case 'burst':
        steps[n.id] = {
          kind: 'burst',
          id: n.id,
          command: p.str('command'),
          rounds: p.num('rounds', { min: 1, max: 10, int: true, def: 1 }) ?? 1,
          next: single(n, 'output', 'MISSING_NEXT'),
        };
        break;
      case 'opentalk':
        steps[n.id] = {
          kind: 'opentalk',
          id: n.id,
          command: p.str('command'),
          next: single(n, 'output', 'MISSING_NEXT'),
        };
        break;
      case 'timer':
        steps[n.id] = {
          kind: 'timer',
          id: n.id,
          command: p.str('command'),
          durationMs: (p.num('duration', { min: 30, max: 1800, def: 30, unit: 'seconds' }) ?? 30) * 1000,
          next: single(n, 'output', 'MISSING_NEXT'),
        };
        break;
      case 'ifelse':
        steps[n.id] = {
          kind: 'ifelse',
          id: n.id,
          conditionText: p.str('conditionText', { required: true }),
          llm: branchLlm(n),
          exits: {
            true: single(n, 'true', 'BRANCH_EXIT_UNCONNECTED'),
            false: single(n, 'false', 'BRANCH_EXIT_UNCONNECTED'),
          },
        };
        break;
      case 'categorize': {
        const categories = p.strings('categories', { required: true, max: MAX_CATEGORIES });
        for (const e of from(n.id)) {
          const m = CATEGORY_HANDLE.exec(e.sourceHandle);
          if (!m || Number(m[1]) >= categories.length) {
            out.add(
              'CATEGORY_HANDLES_MISMATCH',
              `exit "${e.sourceHandle}" has no category (there are ${categories.length})`,
              { nodeId: n.id, edgeIndex: e.index },
            );
          }
        }
        steps[n.id] = {
          kind: 'categorize',
          id: n.id,
          command: p.str('command'),
          categories,
          llm: branchLlm(n),
          exits: categories.map((_, i) => single(n, `cat_${i}`, 'BRANCH_EXIT_UNCONNECTED')),
        };
        break;
      }
      case 'transfer':
        steps[n.id] = {
          kind: 'transfer',
          id: n.id,
          targetAgentId: p.str('targetAgentId', { required: true }),
        };
        break;
      case 'end':
        steps[n.id] = {
          kind: 'end',
          id: n.id,
          command: p.str('command'),
          isLiteral: p.bool('isLiteral', false),
          post: postOf(n.id),
        };
        break;
    }
  }

  // ---- shape of the step graph ----
  const nextOf = (s: Step): string[] =>
    s.kind === 'ifelse'
      ? [s.exits.true, s.exits.false]
      : s.kind === 'categorize'
        ? s.exits
        : 'next' in s
          ? [s.next]
          : [];
  if (start && steps[start.id]) {
    const first = steps[(steps[start.id] as { next: string }).next];
    if (first && BRANCH.has(first.kind)) {
      out.add(
        'BRANCH_AFTER_START',
        `a ${first.kind} cannot come right after start: there is no conversation to judge yet`,
        { nodeId: first.id },
      );
    }
    const reachable = new Set<string>([start.id]);
    const queue = [start.id];
    while (queue.length) {
      for (const nxt of nextOf(steps[queue.shift()!]!)) {
        if (nxt && steps[nxt] && !reachable.has(nxt)) {
          reachable.add(nxt);
          queue.push(nxt);
        }
      }
    }
    for (const s of Object.values(steps)) {
      if (!reachable.has(s.id))
        out.add('UNREACHABLE_STEP', `${s.kind} ${s.id} cannot be reached from start`, { nodeId: s.id });
    }
    // steps from which no end or transfer can be reached: fixed point over the graph (cycles allowed)
    const exits = new Set(
      Object.values(steps)
        .filter((s) => TERMINAL.has(s.kind))
        .map((s) => s.id),
    );
    let grew = true;
    while (grew) {
      grew = false;
      for (const s of Object.values(steps)) {
        if (!exits.has(s.id) && nextOf(s).some((n) => exits.has(n))) {
          exits.add(s.id);
          grew = true;
        }
      }
    }
    for (const id of reachable) {
      const s = steps[id]!;
      if (!exits.has(id) && nextOf(s).every((n) => n !== '')) {
        out.add('NO_EXIT_PATH', `no end or transfer can be reached from ${s.kind} ${id}`, { nodeId: id });
      }
    }
  }
  const chained = new Set(
    Object.values(steps).flatMap((s) => (s.kind === 'end' ? s.post.map((p) => p.id) : [])),
  );
  for (const n of flow.nodes) {
    if (NODE_TYPES[n.nodeType]?.role === 'post' && !chained.has(n.id)) {
      out.add('UNREACHABLE_STEP', `${n.nodeType} ${n.id} runs only when chained after an end step`, {
        nodeId: n.id,
      });
    }
  }

  if (out.issues.length > 0 || !llm || !tts || !stt || !start) {
    return { ok: false, issues: out.issues };
  }
  const config: CompiledFlow = { agent, providers: { llm, tts, stt }, tools, startStepId: start.id, steps };
  return { ok: true, config };
}
