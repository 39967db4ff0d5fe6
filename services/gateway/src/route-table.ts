import {
  AgentIdParams,
  AppendMessageBody,
  CloseTestSessionBody,
  CreateAgentBody,
  CreateConversationEntryBody,
  CreateTestSessionBody,
  DeployParams,
  EmptyBody,
  AgentSessionRequest,
  EndAgentSessionBody,
  ValidateFlowBody,
  StartTextSessionBody,
  StartVoiceSessionBody,
  TextTurnBody,
  PatchAgentBody,
  Subjects,
  TestSessionParams,
  UpdateDeployBody,
  VersionParams,
  VersionDiffParams,
  VersionDiffQuery,
  CreateTestCaseBody,
  UpdateTestCaseBody,
  TestCaseParams,
  CreateTestRunBody,
  GenerateTestCasesBody,
  TestRunParams,
  TestRunQuery,
  DeployGate,
  VersionStatsParams,
  AgentStatsQuery,
  type RequestOf,
  type Subject,
} from '@vab/contracts';
import { EXAMPLE_FLOW } from '@vab/flow';
import type { z } from 'zod';

export interface RouteInput<P, B> {
  params: P;
  /** The query string, as the route's `query` schema let it through (empty without one). */
  query: Record<string, string | undefined>;
  body: B;
  ifMatch: string | undefined;
}

export interface RouteDef<S extends Subject = Subject, P = unknown, B = unknown> {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  subject: S;
  summary: string;
  tag: string;
  params?: z.ZodType<P>;
  /** Query-string parameters (all optional strings). */
  query?: z.ZodType<Record<string, string | undefined>>;
  /** Absent: the route takes no body (one sent anyway is ignored). */
  body?: z.ZodType<B>;
  /** Body may be omitted entirely (treated as `{}`). */
  bodyOptional?: boolean;
  /** An example body, for the API document. */
  example?: B;
  toRequest: (input: RouteInput<P, B>) => RequestOf<S>;
  status?: number;
  /** Starts something that spends money (a session): the stricter rate limit applies. */
  expensive?: boolean;
  /**
   * The resource's own read-only fields: a front end that saves the whole object sends them back, so they
   * are accepted and dropped. Any other field the body schema does not know answers 400 naming it.
   */
  readOnly?: readonly string[];
  /** The body is a flow at its top level (a canvas's own fields beside nodes and edges): kept as sent. */
  lenientBody?: boolean;
  /**
   * The text turn's second form: asked with `Accept: text/event-stream`, it answers with the session's events
   * as the turn makes them, then its result (events.ts `streamTurn`).
   */
  streamsEvents?: boolean;
}

const AGENT_FIELDS = ['id', 'createdAt', 'updatedAt', 'version', 'archived', 'archivedAt'] as const;
const TEST_SESSION_FIELDS = ['id', 'agentId', 'startedAt', 'status', 'usage', 'version', 'recording'] as const;
const TEST_CASE_FIELDS = ['id', 'agentId', 'createdAt', 'updatedAt'] as const;

function route<S extends Subject, P = Record<string, never>, B = undefined>(
  def: RouteDef<S, P, B>,
): RouteDef<S, P, B> {
  return def;
}

/**
 * Each REST route of the spec, mapped explicitly to the subject that serves it. No generic pass-through:
 * a route exists only when it is listed here, and its input is validated before it reaches the bus.
 */
const routeTable = [
  route({
    method: 'GET',
    url: '/api/agents',
    subject: Subjects.agentsList,
    tag: 'agents',
    summary: 'List active agents, newest update first',
    toRequest: () => ({}),
  }),
  route({
    method: 'POST',
    url: '/api/agents',
    subject: Subjects.agentsCreate,
    tag: 'agents',
    summary: 'Create an agent and its first version snapshot',
    example: { name: 'Front desk', flow: EXAMPLE_FLOW },
    body: CreateAgentBody,
    readOnly: AGENT_FIELDS,
    status: 201,
    toRequest: ({ body }) => body,
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id',
    subject: Subjects.agentsGet,
    tag: 'agents',
    summary: 'Read an agent with its latest snapshot',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ id: params.id }),
  }),
  route({
    method: 'PATCH',
    url: '/api/agents/:id',
    subject: Subjects.agentsUpdate,
    tag: 'agents',
    summary: 'Rename and/or save a new snapshot (If-Match for optimistic concurrency)',
    example: { name: 'Front desk (weekends)', flow: EXAMPLE_FLOW },
    params: AgentIdParams,
    body: PatchAgentBody,
    readOnly: AGENT_FIELDS,
    toRequest: ({ params, body, ifMatch }) => ({ id: params.id, patch: body, ifMatch }),
  }),
  route({
    method: 'DELETE',
    url: '/api/agents/:id',
    subject: Subjects.agentsArchive,
    tag: 'agents',
    summary: 'Archive an agent (soft delete)',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ id: params.id }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/versions',
    subject: Subjects.agentsVersionsList,
    tag: 'agents',
    summary: 'List version snapshots (metadata only)',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ id: params.id }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/versions/:version',
    subject: Subjects.agentsVersionsGet,
    tag: 'agents',
    summary: 'Read one version snapshot with its flow',
    params: VersionParams,
    toRequest: ({ params }) => ({ id: params.id, version: params.version }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/versions/:version/restore',
    subject: Subjects.agentsVersionsRestore,
    tag: 'agents',
    summary: 'Save an old snapshot as the new latest version',
    example: {},
    params: VersionParams,
    body: EmptyBody,
    bodyOptional: true,
    toRequest: ({ params, ifMatch }) => ({ id: params.id, version: params.version, ifMatch }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/conversations',
    subject: Subjects.conversationsList,
    tag: 'conversations',
    summary: "The agent's builder chat history, oldest first",
    params: AgentIdParams,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/conversations',
    subject: Subjects.conversationsAppend,
    tag: 'conversations',
    summary: 'Append a builder chat entry',
    example: {
      role: 'assistant',
      content: 'I added a greeting.',
      operations: [{ type: 'add_node', node: { id: 'start-1', nodeType: 'start', command: 'Hello!' } }],
      nodeAttachments: ['agent-1'],
    },
    params: AgentIdParams,
    body: CreateConversationEntryBody,
    readOnly: ['id', 'timestamp'],
    status: 201,
    toRequest: ({ params, body }) => ({ agentId: params.id, entry: body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-sessions',
    subject: Subjects.testSessionsList,
    tag: 'test-sessions',
    summary: 'Test sessions, newest start first',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/test-sessions',
    subject: Subjects.testSessionsCreate,
    tag: 'test-sessions',
    summary: 'Open a test session',
    example: { sessionType: 'voice', roomName: 'vab-pg-2f0c' },
    params: AgentIdParams,
    body: CreateTestSessionBody,
    readOnly: [...TEST_SESSION_FIELDS, 'endedAt', 'durationMs'],
    status: 201,
    toRequest: ({ params, body }) => ({ agentId: params.id, session: body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-sessions/:sessionId',
    subject: Subjects.testSessionsGet,
    tag: 'test-sessions',
    summary: 'One test session',
    params: TestSessionParams,
    toRequest: ({ params }) => ({ agentId: params.id, sessionId: params.sessionId }),
  }),
  route({
    method: 'PATCH',
    url: '/api/agents/:id/test-sessions/:sessionId',
    subject: Subjects.testSessionsClose,
    tag: 'test-sessions',
    summary: 'Close a test session (idempotent with the same values)',
    example: { endedAt: 1767225600000, durationMs: 93000 },
    params: TestSessionParams,
    body: CloseTestSessionBody,
    readOnly: [...TEST_SESSION_FIELDS, 'roomName', 'sessionType'],
    toRequest: ({ params, body }) => ({ agentId: params.id, sessionId: params.sessionId, close: body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-sessions/:sessionId/messages',
    subject: Subjects.messagesList,
    tag: 'test-sessions',
    summary: 'Messages of a session in timestamp order (ties in arrival order)',
    params: TestSessionParams,
    toRequest: ({ params }) => ({ agentId: params.id, sessionId: params.sessionId }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/test-sessions/:sessionId/messages',
    subject: Subjects.messagesAppend,
    tag: 'test-sessions',
    summary: 'Append a transcript message',
    example: { role: 'user', content: 'I would like to book.', stepId: 'start-1', timestamp: 1767225601000 },
    params: TestSessionParams,
    body: AppendMessageBody,
    readOnly: ['id', 'seq'],
    status: 201,
    toRequest: ({ params, body }) => ({ agentId: params.id, sessionId: params.sessionId, message: body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/deploys',
    subject: Subjects.deploysList,
    tag: 'deploys',
    summary: 'Deploy records, newest first',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/deploys',
    subject: Subjects.deploysCreate,
    tag: 'deploys',
    summary: "Create a deploy record pinning the agent's current version",
    example: {},
    params: AgentIdParams,
    body: EmptyBody,
    bodyOptional: true,
    status: 201,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'PATCH',
    url: '/api/agents/:id/deploys/:deployId',
    subject: Subjects.deploysUpdate,
    tag: 'deploys',
    summary: 'Move a deploy to its next status (pending → building → live | failed)',
    example: { status: 'building' as const },
    params: DeployParams,
    body: UpdateDeployBody,
    readOnly: [
      'id',
      'agentId',
      'deployNumber',
      'version',
      'subdomain',
      'createdAt',
      'updatedAt',
      'gateOverride',
    ],
    toRequest: ({ params, body }) => ({ agentId: params.id, deployId: params.deployId, update: body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/versions/:a/diff/:b',
    subject: Subjects.agentsVersionsDiff,
    tag: 'agents',
    summary: 'What changed between two versions: nodes added, removed and changed (params), edges',
    params: VersionDiffParams,
    query: VersionDiffQuery,
    toRequest: ({ params, query }) => ({
      id: params.id,
      a: params.a,
      b: params.b,
      canvas: query.canvas === 'true',
    }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/versions/:version/stats',
    subject: Subjects.statsVersion,
    tag: 'stats',
    summary: "A version's sessions, turns, p50/p90/p99 of each turn figure (ms), usage and errors",
    params: VersionStatsParams,
    toRequest: ({ params }) => ({ agentId: params.id, version: params.version }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/stats',
    subject: Subjects.statsAgent,
    tag: 'stats',
    summary: "The agent's figures over every version and draft since a UTC day (default: the last 7 days)",
    params: AgentIdParams,
    query: AgentStatsQuery,
    toRequest: ({ params, query }) => ({ agentId: params.id, since: query.since }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-cases',
    subject: Subjects.testCasesList,
    tag: 'tests',
    summary: "The agent's regression test cases, oldest first",
    params: AgentIdParams,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/test-cases',
    subject: Subjects.testCasesCreate,
    tag: 'tests',
    summary:
      'Create a test case: scripted turns, a simulated caller (persona and goal), or from a recorded test session',
    example: {
      name: 'Asks for the order number',
      simulation: {
        persona: 'An impatient customer who does not volunteer details',
        goal: 'Find out when order 1234 ships',
        maxTurns: 8,
      },
      mocks: { tools: { lookup_order: { result: 'Order 1234 ships on Tuesday.' } } },
      criteria: [{ name: 'asks for the order number', description: 'The agent asks for the order number.' }],
      repeat: 5,
      minPassRate: 0.8,
    },
    params: AgentIdParams,
    body: CreateTestCaseBody,
    readOnly: TEST_CASE_FIELDS,
    status: 201,
    toRequest: ({ params, body }) => ({ agentId: params.id, body }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/test-cases/generate',
    subject: Subjects.testCasesGenerate,
    tag: 'tests',
    summary: "A model proposes simulated test cases from the agent's latest flow (returned, not stored)",
    example: { count: 3, focus: 'callers who do not know their order number' },
    params: AgentIdParams,
    body: GenerateTestCasesBody,
    expensive: true,
    toRequest: ({ params, body }) => ({ agentId: params.id, body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-cases/:caseId',
    subject: Subjects.testCasesGet,
    tag: 'tests',
    summary: 'One test case',
    params: TestCaseParams,
    toRequest: ({ params }) => ({ agentId: params.id, caseId: params.caseId }),
  }),
  route({
    method: 'PATCH',
    url: '/api/agents/:id/test-cases/:caseId',
    subject: Subjects.testCasesUpdate,
    tag: 'tests',
    summary: 'Change a test case (the fields sent)',
    example: { expect: { steps: ['start', 'booking'], ends: true } },
    params: TestCaseParams,
    body: UpdateTestCaseBody,
    readOnly: [...TEST_CASE_FIELDS, 'fromSession'],
    toRequest: ({ params, body }) => ({ agentId: params.id, caseId: params.caseId, update: body }),
  }),
  route({
    method: 'DELETE',
    url: '/api/agents/:id/test-cases/:caseId',
    subject: Subjects.testCasesDelete,
    tag: 'tests',
    summary: 'Delete a test case (idempotent)',
    params: TestCaseParams,
    toRequest: ({ params }) => ({ agentId: params.id, caseId: params.caseId }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-runs',
    subject: Subjects.testRunsList,
    tag: 'tests',
    summary: 'Test runs, newest first, each with its verdicts so far (per case: verdict and pass rate only)',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/test-runs',
    subject: Subjects.testRunsCreate,
    tag: 'tests',
    summary: 'Run test cases against a version (default: the latest, every case); answers at once',
    example: { version: 3 },
    params: AgentIdParams,
    body: CreateTestRunBody,
    bodyOptional: true,
    status: 202,
    expensive: true,
    toRequest: ({ params, body }) => ({ agentId: params.id, body }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/test-runs/:runId',
    subject: Subjects.testRunsGet,
    tag: 'tests',
    summary: 'One test run: status, counts, and per case the verdict and what differed (paged by size)',
    params: TestRunParams,
    query: TestRunQuery,
    toRequest: ({ params, query }) => ({
      agentId: params.id,
      runId: params.runId,
      ...(query.casesFrom !== undefined ? { casesFrom: Number(query.casesFrom) } : {}),
    }),
  }),
  route({
    method: 'GET',
    url: '/api/agents/:id/deploy-gate',
    subject: Subjects.deployGateGet,
    tag: 'deploys',
    summary: 'Whether a deploy may go live only on a version whose last test run passed',
    params: AgentIdParams,
    toRequest: ({ params }) => ({ agentId: params.id }),
  }),
  route({
    method: 'PUT',
    url: '/api/agents/:id/deploy-gate',
    subject: Subjects.deployGateSet,
    tag: 'deploys',
    summary: 'Turn the deploy gate on or off',
    example: { enabled: true },
    params: AgentIdParams,
    body: DeployGate,
    toRequest: ({ params, body }) => ({ agentId: params.id, gate: body }),
  }),
  route({
    method: 'POST',
    url: '/api/flows/validate',
    subject: Subjects.flowsValidate,
    tag: 'playground',
    summary: 'Lint a flow: every problem that would stop it from running, with codes and node/edge ids',
    example: { ...EXAMPLE_FLOW, sessionType: 'voice' },
    body: ValidateFlowBody,
    lenientBody: true,
    toRequest: ({ body }) => body,
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/text-sessions',
    subject: Subjects.textSessionStart,
    tag: 'text-sessions',
    summary: 'Start a text test session with the agent (its stored flow, or `flow` to try unsaved edits)',
    example: { apiKeys: { openai: '<PROVIDER_KEY>' } },
    params: AgentIdParams,
    body: StartTextSessionBody,
    bodyOptional: true,
    status: 201,
    expensive: true,
    toRequest: ({ params, body }) => ({ agentId: params.id, body }),
  }),
  route({
    method: 'POST',
    url: '/api/agent-session',
    subject: Subjects.agentSessionCreate,
    tag: 'playground',
    summary: "Create a media room, start the flow's agent in it, and return the browser's credentials",
    example: {
      ...EXAMPLE_FLOW,
      livekit: { url: 'wss://example.livekit.cloud', apiKey: '<API_KEY>', apiSecret: '<API_SECRET>' },
      apiKeys: { openai: '<PROVIDER_KEY>', elevenlabs: '<PROVIDER_KEY>', deepgram: '<PROVIDER_KEY>' },
    },
    body: AgentSessionRequest,
    lenientBody: true,
    expensive: true,
    toRequest: ({ body }) => body,
  }),
  route({
    method: 'DELETE',
    url: '/api/agent-session',
    subject: Subjects.agentSessionEnd,
    tag: 'playground',
    summary: 'Stop the agent and delete the room (idempotent)',
    example: { roomName: 'vab-pg-2f0c9a44-7d1e-4b6e-9a51-3c2f1e0d8b7a' },
    body: EndAgentSessionBody,
    toRequest: ({ body }) => body,
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/text-sessions/:sessionId/turns',
    subject: Subjects.textSessionTurn,
    tag: 'text-sessions',
    summary: "Say something: the agent's replies, the current step and the steps entered",
    example: { text: 'I would like to book an appointment.' },
    params: TestSessionParams,
    body: TextTurnBody,
    streamsEvents: true,
    toRequest: ({ params, body }) => ({ agentId: params.id, sessionId: params.sessionId, text: body.text }),
  }),
  route({
    method: 'DELETE',
    url: '/api/agents/:id/text-sessions/:sessionId',
    subject: Subjects.textSessionEnd,
    tag: 'text-sessions',
    summary: 'End a text session (idempotent)',
    params: TestSessionParams,
    toRequest: ({ params }) => ({ agentId: params.id, sessionId: params.sessionId }),
  }),
  route({
    method: 'POST',
    url: '/api/agents/:id/voice-sessions',
    subject: Subjects.voiceSessionStart,
    tag: 'voice-sessions',
    summary:
      'Start a voice session with the agent over a WebSocket (no media server): then open `audioPath` (docs/api.md › Voice sessions)',
    example: {
      apiKeys: { openai: '<PROVIDER_KEY>' },
      audio: { sampleRate: 16000, frameMs: 20 },
      record: true,
    },
    params: AgentIdParams,
    body: StartVoiceSessionBody,
    bodyOptional: true,
    status: 201,
    expensive: true,
    toRequest: ({ params, body }) => ({ agentId: params.id, body }),
  }),
  route({
    method: 'DELETE',
    url: '/api/agents/:id/voice-sessions/:sessionId',
    subject: Subjects.voiceSessionEnd,
    tag: 'voice-sessions',
    summary: 'End a voice session (idempotent; closing its audio socket ends it too)',
    params: TestSessionParams,
    toRequest: ({ params }) => ({ agentId: params.id, sessionId: params.sessionId }),
  }),
  route({
    method: 'GET',
    url: '/api/env-keys',
    subject: Subjects.envKeys,
    tag: 'playground',
    summary: 'Which provider keys the server environment has (booleans only)',
    toRequest: () => ({}),
  }),
] as const;

export type AnyRoute = RouteDef<Subject, unknown, unknown>;

export const routes: readonly AnyRoute[] = routeTable as unknown as readonly AnyRoute[];
