import type { Flow, SimpleEdge, SimpleNode } from '@vab/contracts';

/** An edge as the builder draws it; a target's handle is `in` unless named. */
export const edge = (
  source: string,
  sourceHandle: string,
  target: string,
  targetHandle = 'in',
): SimpleEdge => ({
  source,
  sourceHandle,
  target,
  targetHandle,
});
const e = edge;

/** The `llm`, `tts` and `stt` nodes into the `agent` node, and the agent into its `start` step. */
const agentWiring = (): SimpleEdge[] => [
  e('llm', 'output', 'agent', 'llm_in'),
  e('tts', 'output', 'agent', 'tts_in'),
  e('stt', 'output', 'agent', 'stt_in'),
  e('agent', 'output', 'start'),
];

/**
 * A flow that uses every step kind: greeting → 2-round burst → opentalk → 3-way categorize →
 * (if/else → end | timer → end | transfer), with structured output and a webhook after the end.
 */
export function fullFlow(): Flow {
  const nodes: SimpleNode[] = [
    {
      id: 'agent',
      nodeType: 'agent',
      name: 'Clinic',
      instructions: 'You book appointments.',
      language: 'en',
    },
    { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini', temperature: 0.4 },
    { id: 'tts', nodeType: 'tts', provider: 'elevenlabs', voiceId: 'v1', stability: 0.5 },
    { id: 'stt', nodeType: 'stt', provider: 'deepgram', model: 'nova-3' },
    { id: 'start', nodeType: 'start', command: 'Hello, this is the clinic.', isLiteral: true },
    { id: 'burst', nodeType: 'burst', command: 'Ask for their name and date of birth.', rounds: 2 },
    { id: 'talk', nodeType: 'opentalk', command: 'Find out why they call.' },
    {
      id: 'cat',
      nodeType: 'categorize',
      command: 'Why do they call?',
      categories: ['booking', 'question', 'other'],
    },
    { id: 'ifelse', nodeType: 'ifelse', conditionText: 'The user confirmed the booking.' },
    { id: 'timer', nodeType: 'timer', command: 'Answer their question.', duration: 60 },
    { id: 'transfer', nodeType: 'transfer', targetAgentId: 'front-desk' },
    { id: 'end', nodeType: 'end', command: 'Goodbye!', isLiteral: true },
    {
      id: 'so',
      nodeType: 'structured_output',
      command: 'Extract the booking.',
      schemaFields: [
        { name: 'name', type: 'string' },
        { name: 'urgent', type: 'boolean' },
      ],
    },
    { id: 'hook', nodeType: 'webhook', url: 'http://127.0.0.1:9/hook' },
  ];
  const edges: SimpleEdge[] = [
    ...agentWiring(),
    e('start', 'output', 'burst'),
    e('burst', 'output', 'talk'),
    e('talk', 'output', 'cat'),
    e('cat', 'cat_0', 'ifelse'),
    e('cat', 'cat_1', 'timer'),
    e('cat', 'cat_2', 'transfer'),
    e('ifelse', 'true', 'end'),
    e('ifelse', 'false', 'talk'),
    e('timer', 'output', 'end'),
    e('end', 'output', 'so'),
    e('so', 'output', 'hook'),
  ];
  return { nodes, edges };
}

/**
 * A small order desk: greeting → open talk → end, its model at `modelURL` (a stub), and with `mcp` an MCP
 * server's `lookup_order` tool behind a bearer token. What the simulated-caller tests and bench talk to.
 */
/**
 * A voice agent whose models all answer at loopback stubs: greeting → free talk → goodbye, its chat at
 * `chatURL` and its OpenAI speech (TTS and STT) at `speechURL`; `agent` adds params to the agent node (turns).
 */
export function voiceFlow(opts: {
  chatURL: string;
  speechURL: string;
  agent?: Record<string, unknown>;
}): Flow {
  return {
    nodes: [
      {
        id: 'agent',
        nodeType: 'agent',
        name: 'Clinic',
        instructions: 'You book appointments.',
        ...opts.agent,
      },
      { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'stub', baseURL: opts.chatURL },
      { id: 'tts', nodeType: 'tts', provider: 'openai', voiceId: 'alloy', baseURL: opts.speechURL },
      { id: 'stt', nodeType: 'stt', provider: 'openai', baseURL: opts.speechURL },
      { id: 'start', nodeType: 'start', command: 'Hello, how can I help?', isLiteral: true },
      { id: 'talk', nodeType: 'opentalk', command: 'Help the caller.' },
      { id: 'end', nodeType: 'end', command: 'Goodbye!', isLiteral: true },
    ],
    edges: [...agentWiring(), e('start', 'output', 'talk'), e('talk', 'output', 'end')],
  };
}

export function orderFlow(opts: {
  modelURL: string;
  instructions?: string;
  mcp?: { url: string; token: string };
}): Flow {
  const nodes: SimpleNode[] = [
    {
      id: 'agent',
      nodeType: 'agent',
      name: 'Orders',
      instructions: opts.instructions ?? 'Help with orders.',
      language: 'en',
    },
    { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'stub', baseURL: opts.modelURL },
    { id: 'tts', nodeType: 'tts', provider: 'elevenlabs', voiceId: 'v1' },
    { id: 'stt', nodeType: 'stt', provider: 'deepgram' },
    { id: 'start', nodeType: 'start', command: 'Hello, order desk.', isLiteral: true },
    { id: 'talk', nodeType: 'opentalk', command: 'Help with the order.' },
    { id: 'end', nodeType: 'end', command: 'Goodbye!', isLiteral: true },
  ];
  const edges: SimpleEdge[] = [...agentWiring(), e('start', 'output', 'talk'), e('talk', 'output', 'end')];
  if (opts.mcp) {
    nodes.push({
      id: 'orders',
      nodeType: 'mcp',
      serverUrl: opts.mcp.url,
      authType: 'bearer',
      authValue: opts.mcp.token,
      selectedTools: ['lookup_order'],
    });
    edges.push(e('orders', 'output', 'agent', 'tools_in'));
  }
  return { nodes, edges };
}

export function withNode(flow: Flow, id: string, patch: Record<string, unknown>): Flow {
  return { ...flow, nodes: flow.nodes.map((n) => (n.id === id ? { ...n, ...patch } : n)) };
}

export function withoutNode(flow: Flow, id: string): Flow {
  return {
    nodes: flow.nodes.filter((n) => n.id !== id),
    edges: flow.edges.filter((x) => x.source !== id && x.target !== id),
  };
}

export function withoutEdge(flow: Flow, source: string, sourceHandle: string): Flow {
  return {
    ...flow,
    edges: flow.edges.filter((x) => !(x.source === source && x.sourceHandle === sourceHandle)),
  };
}

export function withEdge(
  flow: Flow,
  source: string,
  sourceHandle: string,
  target: string,
  targetHandle = 'in',
): Flow {
  return { ...flow, edges: [...flow.edges, e(source, sourceHandle, target, targetHandle)] };
}
