import type { Flow } from '@vab/contracts';
import { describe, expect, it } from 'vitest';
import { compile } from './compiler.js';
import { PARAMS } from './params.js';
import { fullFlow, withEdge, withNode, withoutEdge, withoutNode } from '@vab/testkit';
import type { FlowIssueCode } from './types.js';

/** start → b1 → b2 → b1 …: talk forever; the end exists but nothing leads to it. */
function loopWithoutExit(): Flow {
  const f = fullFlow();
  const keep = new Set(['agent', 'llm', 'tts', 'stt', 'start', 'end']);
  const base: Flow = {
    nodes: f.nodes.filter((n) => keep.has(n.id)),
    edges: f.edges.filter((x) => keep.has(x.source) && keep.has(x.target) && x.source !== 'start'),
  };
  base.nodes.push({ id: 'b1', nodeType: 'burst' }, { id: 'b2', nodeType: 'burst' });
  return withEdge(
    withEdge(withEdge(base, 'start', 'output', 'b1'), 'b1', 'output', 'b2'),
    'b2',
    'output',
    'b1',
  );
}

const codes = (flow: Flow) => {
  const r = compile(flow);
  return r.ok ? [] : r.issues.map((i) => i.code);
};

describe('compile: a runnable flow', () => {
  it('compiles every step kind into a config', () => {
    const r = compile(fullFlow());
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    const { config } = r;
    expect(config.agent).toMatchObject({
      id: 'agent',
      name: 'Clinic',
      instructions: 'You book appointments.',
      language: 'en',
      allowInterruptions: true,
    });
    expect(config.providers.llm).toMatchObject({
      provider: 'openai',
      model: 'gpt-4o-mini',
      temperature: 0.4,
    });
    expect(config.providers.tts).toMatchObject({
      provider: 'elevenlabs',
      voiceId: 'v1',
      extras: { stability: 0.5 },
    });
    expect(config.startStepId).toBe('start');
    expect(config.steps.start).toEqual({
      kind: 'start',
      id: 'start',
      command: 'Hello, this is the clinic.',
      isLiteral: true,
      next: 'burst',
    });
    expect(config.steps.burst).toMatchObject({ kind: 'burst', rounds: 2, next: 'talk' });
    expect(config.steps.cat).toMatchObject({ kind: 'categorize', exits: ['ifelse', 'timer', 'transfer'] });
    expect(config.steps.ifelse).toMatchObject({ exits: { true: 'end', false: 'talk' } });
    expect(config.steps.timer).toMatchObject({ durationMs: 60_000 });
    expect(config.steps.end).toMatchObject({
      kind: 'end',
      post: [
        { kind: 'structured_output', id: 'so' },
        { kind: 'webhook', id: 'hook' },
      ],
    });
  });

  it('accepts the older framework + persona serialization as the same thing as agent', () => {
    const flow = fullFlow();
    const legacy: Flow = {
      nodes: [
        ...flow.nodes.filter((n) => n.id !== 'agent'),
        { id: 'agent', nodeType: 'framework', provider: 'livekit' },
        {
          id: 'persona',
          nodeType: 'persona',
          name: 'Clinic',
          instructions: 'You book appointments.',
          language: 'en',
        },
      ],
      edges: [
        ...flow.edges,
        { source: 'persona', sourceHandle: 'output', target: 'agent', targetHandle: 'persona_in' },
      ],
    };
    const a = compile(flow);
    const b = compile(legacy);
    expect(b.ok).toBe(true);
    if (a.ok && b.ok) expect(b.config).toEqual(a.config);
  });

  it('allows cycles that have an exit (talk → check → talk)', () => {
    expect(codes(fullFlow())).toEqual([]);
  });

  it('reads a handle a canvas left unnamed (null or absent) as the only one its side has', () => {
    const f = fullFlow();
    const canvas: Flow = {
      // what React Flow serializes: one-handle sides as null, canvas fields beside the params
      nodes: f.nodes.map((n) => ({ ...n, position: { x: 1, y: 2 }, data: { label: n.id }, selected: false })),
      edges: f.edges.map((e, i) => ({
        ...e,
        id: `e${i}`,
        type: 'smoothstep',
        sourceHandle: e.sourceHandle === 'output' ? null : e.sourceHandle,
        // an input the source's kind tells: `in` from a step, `llm_in` from an llm …
        targetHandle: i % 2 === 0 ? null : e.targetHandle,
      })),
    };
    const r = compile(canvas);
    const plain = compile(f);
    if (!r.ok || !plain.ok) throw new Error(JSON.stringify(r));
    // the same run (the TTS node's extras carry the canvas fields along; its plugin reads only its own)
    const runOnly = (c: typeof r.config) => ({
      ...c,
      providers: { ...c.providers, tts: { ...c.providers.tts, extras: {} } },
    });
    expect(runOnly(r.config)).toEqual(runOnly(plain.config));
    // an if/else has two outputs: an unnamed one cannot be told
    const ambiguous = withEdge(withoutEdge(f, 'ifelse', 'true'), 'ifelse', null as never, 'end');
    expect(compile(ambiguous)).toMatchObject({
      ok: false,
      issues: expect.arrayContaining([
        expect.objectContaining({
          code: 'EDGE_UNKNOWN_HANDLE',
          nodeId: 'ifelse',
          message: 'ifelse ifelse: edge 15 names none of its outputs',
        }),
      ]),
    });
  });

  it('reports a node without a nodeType as an unknown type, not a crash', () => {
    const f = fullFlow();
    const r = compile({ ...f, nodes: [...f.nodes, { id: 'sticky-note', data: { text: 'todo' } }] });
    expect(r).toMatchObject({
      ok: false,
      issues: [
        { code: 'UNKNOWN_NODE_TYPE', nodeId: 'sticky-note', message: 'node sticky-note has no nodeType' },
      ],
    });
  });

  it("reads the agent's turn handling, LiveKit's defaults where unset, and speech providers' URLs", () => {
    const plain = compile(fullFlow());
    // unset, every turn setting is its param's default (params.test.ts lists them)
    const { name: _n, instructions: _i, language: _l, ...turnDefaults } = PARAMS.agent.parse({});
    expect(plain.ok && plain.config.agent).toMatchObject(turnDefaults);
    const tuned = compile(
      withNode(
        withNode(
          withNode(fullFlow(), 'agent', {
            turnDetection: 'vad',
            minEndpointingDelay: '800',
            preemptiveGeneration: false,
          }),
          'stt',
          { provider: 'openai', baseURL: 'https://speech.example/v1', mode: 'realtime' },
        ),
        'tts',
        { provider: 'openai', baseURL: 'https://speech.example/v1' },
      ),
    );
    expect(tuned.ok).toBe(true);
    if (!tuned.ok) return;
    expect(tuned.config.agent).toMatchObject({
      turnDetection: 'vad',
      minEndpointingDelay: 800,
      preemptiveGeneration: false,
    });
    // what the node named, so a phone call replaces only the defaults
    expect(tuned.config.agent.turnSet).toEqual([
      'turnDetection',
      'minEndpointingDelay',
      'preemptiveGeneration',
    ]);
    expect(tuned.config.providers.stt).toMatchObject({
      baseURL: 'https://speech.example/v1',
      mode: 'realtime',
    });
    // a URL is a param of ours, not a provider extra passed through to the TTS plugin
    expect(tuned.config.providers.tts.baseURL).toBe('https://speech.example/v1');
    expect(tuned.config.providers.tts.extras).not.toHaveProperty('baseURL');
  });

  it('accepts numbers sent as text by form inputs', () => {
    expect(codes(withNode(fullFlow(), 'burst', { rounds: '3' }))).toEqual([]);
  });
});

describe('compile: every problem, each with its code and node or edge', () => {
  const cases: [string, () => Flow, FlowIssueCode, string | number | undefined][] = [
    ['no agent', () => withoutNode(fullFlow(), 'agent'), 'NO_AGENT', undefined],
    [
      'two agents',
      () => ({ ...fullFlow(), nodes: [...fullFlow().nodes, { id: 'agent2', nodeType: 'agent' }] }),
      'MULTIPLE_AGENTS',
      'agent2',
    ],
    ['no llm', () => withoutNode(fullFlow(), 'llm'), 'MISSING_LLM', 'agent'],
    ['no tts', () => withoutNode(fullFlow(), 'tts'), 'MISSING_TTS', 'agent'],
    ['no stt', () => withoutNode(fullFlow(), 'stt'), 'MISSING_STT', 'agent'],
    [
      'two llms on one input',
      () =>
        withEdge(
          {
            ...fullFlow(),
            nodes: [...fullFlow().nodes, { id: 'llm2', nodeType: 'llm', provider: 'anthropic' }],
          },
          'llm2',
          'output',
          'agent',
          'llm_in',
        ),
      'HANDLE_TAKEN',
      'agent',
    ],
    ['no start', () => withoutNode(fullFlow(), 'start'), 'NO_START', undefined],
    [
      'two starts',
      () => ({
        ...fullFlow(),
        nodes: [...fullFlow().nodes, { id: 'start2', nodeType: 'start', command: 'Hi' }],
      }),
      'MULTIPLE_STARTS',
      'start2',
    ],
    [
      'agent not wired to start',
      () => withoutEdge(fullFlow(), 'agent', 'output'),
      'AGENT_NOT_CONNECTED_TO_START',
      'agent',
    ],
    [
      'duplicate ids',
      () => ({ ...fullFlow(), nodes: [...fullFlow().nodes, { id: 'end', nodeType: 'end' }] }),
      'DUPLICATE_NODE_ID',
      'end',
    ],
    [
      'unknown node type',
      () => ({ ...fullFlow(), nodes: [...fullFlow().nodes, { id: 'x', nodeType: 'teleport' }] }),
      'UNKNOWN_NODE_TYPE',
      'x',
    ],
    [
      'edge to a missing node',
      () => withEdge(fullFlow(), 'timer', 'output', 'ghost'),
      'EDGE_UNKNOWN_NODE',
      15,
    ],
    [
      'edge from an unknown handle',
      () => withEdge(fullFlow(), 'timer', 'maybe', 'end'),
      'EDGE_UNKNOWN_HANDLE',
      'timer',
    ],
    [
      'edge to an unknown handle',
      () => withEdge(fullFlow(), 'timer', 'output', 'end', 'side'),
      'EDGE_UNKNOWN_HANDLE',
      'end',
    ],
    [
      'tts on the llm input',
      () => withEdge(withoutEdge(fullFlow(), 'llm', 'output'), 'tts', 'output', 'agent', 'llm_in'),
      'EDGE_WRONG_KIND',
      14,
    ],
    [
      'step with two next steps',
      () => withEdge(fullFlow(), 'burst', 'output', 'end'),
      'MULTIPLE_NEXT',
      'burst',
    ],
    ['step leading nowhere', () => withoutEdge(fullFlow(), 'timer', 'output'), 'MISSING_NEXT', 'timer'],
    [
      'unreachable step',
      () => ({
        ...fullFlow(),
        nodes: [...fullFlow().nodes, { id: 'lost', nodeType: 'opentalk' }],
        edges: [
          ...fullFlow().edges,
          { source: 'lost', sourceHandle: 'output', target: 'end', targetHandle: 'in' },
        ],
      }),
      'UNREACHABLE_STEP',
      'lost',
    ],
    [
      'branch exit unconnected',
      () => withoutEdge(fullFlow(), 'ifelse', 'true'),
      'BRANCH_EXIT_UNCONNECTED',
      'ifelse',
    ],
    [
      'branch right after start',
      () => withEdge(withoutEdge(fullFlow(), 'start', 'output'), 'start', 'output', 'cat'),
      'BRANCH_AFTER_START',
      'cat',
    ],
    [
      'category handle without category',
      () => withEdge(fullFlow(), 'cat', 'cat_3', 'end'),
      'CATEGORY_HANDLES_MISMATCH',
      15,
    ],
    [
      'fewer categories than exits',
      () => withNode(fullFlow(), 'cat', { categories: ['booking', 'question'] }),
      'CATEGORY_HANDLES_MISMATCH',
      'cat',
    ],
    [
      'category without its exit',
      () => withNode(fullFlow(), 'cat', { categories: ['booking', 'question', 'other', 'spam'] }),
      'BRANCH_EXIT_UNCONNECTED',
      'cat',
    ],
    ['a loop with no way out', () => loopWithoutExit(), 'NO_EXIT_PATH', 'b1'],
    [
      'burst rounds above 10',
      () => withNode(fullFlow(), 'burst', { rounds: 11 }),
      'PARAM_OUT_OF_RANGE',
      'burst',
    ],
    [
      'burst rounds fractional',
      () => withNode(fullFlow(), 'burst', { rounds: 1.5 }),
      'PARAM_OUT_OF_RANGE',
      'burst',
    ],
    [
      'timer below 30 s',
      () => withNode(fullFlow(), 'timer', { duration: 10 }),
      'PARAM_OUT_OF_RANGE',
      'timer',
    ],
    [
      'timer above 1800 s',
      () => withNode(fullFlow(), 'timer', { duration: 3600 }),
      'PARAM_OUT_OF_RANGE',
      'timer',
    ],
    [
      'temperature out of range',
      () => withNode(fullFlow(), 'llm', { temperature: 5 }),
      'PARAM_OUT_OF_RANGE',
      'llm',
    ],
    [
      'llm without provider',
      () => withNode(fullFlow(), 'llm', { provider: undefined }),
      'PARAM_MISSING',
      'llm',
    ],
    [
      'ifelse without condition',
      () => withNode(fullFlow(), 'ifelse', { conditionText: '' }),
      'PARAM_MISSING',
      'ifelse',
    ],
    [
      'transfer without target',
      () => withNode(fullFlow(), 'transfer', { targetAgentId: undefined }),
      'PARAM_MISSING',
      'transfer',
    ],
    [
      'transfer to a number and an agent at once',
      () => withNode(fullFlow(), 'transfer', { targetNumber: '+14155550100' }),
      'PARAM_OUT_OF_RANGE',
      'transfer',
    ],
    [
      'transfer to a number that is not E.164',
      () => withNode(fullFlow(), 'transfer', { targetAgentId: undefined, targetNumber: '415-555-0100' }),
      'PARAM_OUT_OF_RANGE',
      'transfer',
    ],
    ['start without command', () => withNode(fullFlow(), 'start', { command: '' }), 'PARAM_MISSING', 'start'],
    [
      'webhook with a bad url',
      () => withNode(fullFlow(), 'hook', { url: 'ftp://x' }),
      'PARAM_OUT_OF_RANGE',
      'hook',
    ],
    [
      'enum field without options',
      () => withNode(fullFlow(), 'so', { schemaFields: [{ name: 'kind', type: 'enum' }] }),
      'PARAM_OUT_OF_RANGE',
      'so',
    ],
    [
      'schema field of unknown type',
      () => withNode(fullFlow(), 'so', { schemaFields: [{ name: 'kind', type: 'date' }] }),
      'PARAM_OUT_OF_RANGE',
      'so',
    ],
    [
      'bad language tag',
      () => withNode(fullFlow(), 'agent', { language: 'english please' }),
      'PARAM_OUT_OF_RANGE',
      'agent',
    ],
    ['webhook not after an end', () => withoutEdge(fullFlow(), 'so', 'output'), 'UNREACHABLE_STEP', 'hook'],
  ];

  it.each(cases)('%s → %s', (_name, make, code, where) => {
    const r = compile(make());
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const found = r.issues.filter((i) => i.code === code);
    expect(found.length, JSON.stringify(r.issues)).toBeGreaterThan(0);
    if (typeof where === 'string') expect(found.map((i) => i.nodeId)).toContain(where);
    if (typeof where === 'number') expect(found.map((i) => i.edgeIndex)).toContain(where);
    for (const i of r.issues) expect(i.message.length).toBeGreaterThan(5);
  });

  it('refuses turn settings out of range, each named', () => {
    const r = compile(
      withNode(fullFlow(), 'agent', {
        turnDetection: 'telepathy',
        minEndpointingDelay: 9000,
        minInterruptionWords: 1.5,
        falseInterruptionTimeout: 0,
      }),
    );
    expect(r.ok).toBe(false);
    const messages = r.ok ? [] : r.issues.map((i) => `${i.code} ${i.message}`);
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/PARAM_OUT_OF_RANGE .*turnDetection.* model, vad or stt/),
        expect.stringMatching(/PARAM_OUT_OF_RANGE .*minEndpointingDelay.* 0 to 3000 ms/),
        expect.stringMatching(/PARAM_OUT_OF_RANGE .*minInterruptionWords/),
        expect.stringMatching(/PARAM_OUT_OF_RANGE .*falseInterruptionTimeout/),
      ]),
    );
    const crossed = compile(
      withNode(fullFlow(), 'agent', { minEndpointingDelay: 2000, maxEndpointingDelay: 1000 }),
    );
    expect(crossed.ok ? [] : crossed.issues.map((i) => i.message)).toEqual([
      '`maxEndpointingDelay` must be at least `minEndpointingDelay`',
    ]);
  });

  it('reports every problem at once, not the first only', () => {
    const broken = withNode(withNode(withoutNode(fullFlow(), 'tts'), 'burst', { rounds: 99 }), 'timer', {
      duration: 1,
    });
    expect(codes(broken)).toEqual(expect.arrayContaining(['MISSING_TTS', 'PARAM_OUT_OF_RANGE']));
    expect(codes(broken).filter((c) => c === 'PARAM_OUT_OF_RANGE')).toHaveLength(2);
  });

  it('never throws on a half-built draft', () => {
    const drafts: Flow[] = [
      { nodes: [], edges: [] },
      { nodes: [{ id: 'a', nodeType: 'agent' }], edges: [] },
      {
        nodes: [{ id: 's', nodeType: 'start' }],
        edges: [{ source: 's', sourceHandle: 'output', target: 's', targetHandle: 'in' }],
      },
      { nodes: [{ id: 'c', nodeType: 'categorize', categories: 'nope' }], edges: [] },
      {
        nodes: [{ id: 'so', nodeType: 'structured_output', schemaFields: [null, 3, { name: 1 }] }],
        edges: [],
      },
    ];
    for (const d of drafts) expect(compile(d).ok).toBe(false);
  });
});
