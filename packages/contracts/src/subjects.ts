import { z } from 'zod';
import {
  Agent,
  AgentList,
  AgentLookup,
  AgentVersion,
  ArchivedAgent,
  CreateAgentBody,
  IfMatch,
  PatchAgentBody,
  VersionDiff,
  VersionList,
} from './agents.js';
import { ApiKeys, Id, Ok, SUBJECT_TOKEN, subjectToken } from './common.js';
import { AgentStats, AgentStatsQuery } from './metrics.js';
import { StartVoiceSessionBody, VoiceSessionStarted } from './voice.js';
import {
  CreateDeployBody,
  DeployIssue,
  DeployList,
  DeployRecord,
  StopDeploysRequest,
  StoppedDeploy,
  UpdateDeployBody,
} from './deploys.js';
import {
  AdmitCallRequest,
  AdmittedCall,
  AppendCallMessageRequest,
  Call,
  CallList,
  CallRecordingRequest,
  CallRef,
  CallSettings,
  CallStarted,
  EndCallRequest,
  LivePageAnswer,
  LivePageRequest,
  EndedDetail,
  EndedReason,
  ListCallsRequest,
  StartCallRequest,
} from './calls.js';
import { AnalysisQueued, AnalysisSettings, StoreAnalysisRequest, StoreAnalysisResponse } from './analysis.js';
import { CompareDeploysRequest, DeployComparison, DeployStats, DeployStatsRequest } from './deploy-stats.js';
import {
  CreatedPublicKey,
  CreatePublicKeyBody,
  CredentialStatus,
  PublicKey,
  PublicKeyList,
  PutCredentialsBody,
  SealedCredentials,
  StoreCredentialsRequest,
  VerifiedPublicKey,
  VerifyPublicKeyRequest,
} from './credentials.js';
import { CreatePhoneNumberBody, PhoneNumber, PhoneNumberList, UpdatePhoneNumberBody } from './telephony.js';
import type { ErrorCode } from './errors.js';
import {
  AgentSessionRequest,
  EndAgentSessionBody,
  FlowValidation,
  PlaygroundSession,
  ProviderKeyStatus,
  StartTextSessionBody,
  TextTurnBody,
  TextTurnResult,
  ValidateFlowBody,
} from './playground.js';
import {
  AppendedMessage,
  AppendMessageBody,
  CloseTestSessionBody,
  Recording,
  CloseReport,
  ConversationEntry,
  ConversationList,
  CreateConversationEntryBody,
  CreateTestSessionBody,
  SessionMessageList,
  TestSession,
  TestSessionList,
  CaseObservation,
  CreateTestCaseBody,
  CreateTestRunBody,
  DeployGate,
  GenerateTestCasesBody,
  GeneratedTestCases,
  TestCase,
  TestCaseList,
  TestRun,
  TestRunList,
  UpdateTestCaseBody,
} from './sessions.js';
import {
  CreateWebhookBody,
  DeliveryList,
  Delivery,
  RotateWebhookSecretBody,
  UpdateWebhookBody,
  Webhook,
  WebhookList,
  WebhookWithSecret,
} from './webhooks.js';

/** Every subject is declared here once. The first token names the service that serves it. */
export const Subjects = {
  agentsCreate: 'agents.create',
  agentsList: 'agents.list',
  agentsGet: 'agents.get',
  agentsUpdate: 'agents.update',
  agentsArchive: 'agents.archive',
  agentsLookup: 'agents.lookup',
  agentsVersionsList: 'agents.versions.list',
  agentsVersionsGet: 'agents.versions.get',
  agentsVersionsRestore: 'agents.versions.restore',
  agentsVersionsDiff: 'agents.versions.diff',
  agentsHealth: 'agents.health',

  conversationsList: 'sessions.conversations.list',
  conversationsAppend: 'sessions.conversations.append',
  testSessionsCreate: 'sessions.test-sessions.create',
  testSessionsList: 'sessions.test-sessions.list',
  testSessionsGet: 'sessions.test-sessions.get',
  testSessionsClose: 'sessions.test-sessions.close',
  testSessionsRecording: 'sessions.test-sessions.recording',
  messagesList: 'sessions.messages.list',
  messagesAppend: 'sessions.messages.append',
  deploysCreate: 'sessions.deploys.create',
  deploysList: 'sessions.deploys.list',
  deploysUpdate: 'sessions.deploys.update',
  deploysPinned: 'sessions.deploys.pinned',
  deploysStop: 'sessions.deploys.stop',
  deployGateGet: 'sessions.deploys.gate.get',
  deployGateSet: 'sessions.deploys.gate.set',
  testCasesCreate: 'sessions.test-cases.create',
  testCasesList: 'sessions.test-cases.list',
  testCasesGet: 'sessions.test-cases.get',
  testCasesUpdate: 'sessions.test-cases.update',
  testCasesDelete: 'sessions.test-cases.delete',
  testRunsCreate: 'sessions.runs.create',
  testRunsList: 'sessions.runs.list',
  testRunsGet: 'sessions.runs.get',
  callsAdmit: 'sessions.calls.admit',
  callsAppend: 'sessions.calls.append',
  callsEnd: 'sessions.calls.end',
  callsRecording: 'sessions.calls.recording',
  callsList: 'sessions.calls.list',
  callsGet: 'sessions.calls.get',
  callsErase: 'sessions.calls.erase',
  callSettingsGet: 'sessions.calls.settings.get',
  callSettingsSet: 'sessions.calls.settings.set',
  analysisSettingsGet: 'sessions.analysis.settings.get',
  analysisSettingsSet: 'sessions.analysis.settings.set',
  callsAnalyze: 'sessions.calls.analyze',
  callsAnalysisStore: 'sessions.calls.analysis.store',
  deployStats: 'sessions.deploys.stats',
  deploysCompare: 'sessions.deploys.compare',
  deploysPromote: 'sessions.deploys.promote',
  credentialsStatus: 'sessions.credentials.status',
  credentialsSealed: 'sessions.credentials.sealed',
  credentialsStore: 'sessions.credentials.store',
  publicKeysCreate: 'sessions.public-keys.create',
  publicKeysList: 'sessions.public-keys.list',
  publicKeysRevoke: 'sessions.public-keys.revoke',
  publicKeysVerify: 'sessions.public-keys.verify',
  livePage: 'sessions.live.page',
  statsVersion: 'sessions.stats.version',
  statsAgent: 'sessions.stats.agent',
  sessionsHealth: 'sessions.health',

  flowsValidate: 'playground.flows.validate',
  envKeys: 'playground.env-keys',
  playgroundHealth: 'playground.health',
  textSessionStart: 'playground.text.start',
  textSessionTurn: 'playground.text.turn',
  textSessionEnd: 'playground.text.end',
  voiceSessionStart: 'playground.voice.start',
  voiceSessionEnd: 'playground.voice.end',
  agentSessionCreate: 'playground.room.create',
  agentSessionEnd: 'playground.room.end',
  testCaseRun: 'playground.cases.run',
  testCasesGenerate: 'playground.cases.generate',
  callsStart: 'playground.calls.start',
  callsHangUp: 'playground.calls.end',
  credentialsPut: 'playground.credentials.put',
  deployCheck: 'playground.deploys.check',

  phoneNumbersCreate: 'telephony.numbers.create',
  phoneNumbersList: 'telephony.numbers.list',
  phoneNumbersUpdate: 'telephony.numbers.update',
  phoneNumbersDelete: 'telephony.numbers.delete',
  telephonyHealth: 'telephony.health',
  webhooksCreate: 'webhooks.endpoints.create',
  webhooksList: 'webhooks.endpoints.list',
  webhooksGet: 'webhooks.endpoints.get',
  webhooksUpdate: 'webhooks.endpoints.update',
  webhooksDelete: 'webhooks.endpoints.delete',
  webhooksRotate: 'webhooks.endpoints.rotate',
  webhookDeliveriesList: 'webhooks.deliveries.list',
  webhookDeliveriesRedeliver: 'webhooks.deliveries.redeliver',
  webhooksHealth: 'webhooks.health',
} as const;

/** Every playground instance answers here (no queue group) with its id: who is alive, for the reaper. */
export const PLAYGROUND_INSTANCES_SUBJECT = 'playground.instances';

/**
 * A playground session's owner subject: only the instance that runs the session (by its id: a text or voice
 * session's test session id, a room session's room name) subscribes to it, so a request that reached another
 * instance of the queue group is forwarded there, and "no responders" means the session is gone.
 */
export const ownerSubject = (sessionId: string, verb: OwnerVerb) =>
  `playground.owner.${subjectToken(sessionId, 'a session id')}.${verb}`;
/** What a session's owner answers on its owner subjects. */
export const OWNER_VERBS = ['turn', 'end', 'attach'] as const;
export type OwnerVerb = (typeof OWNER_VERBS)[number];
export type Subject = (typeof Subjects)[keyof typeof Subjects];

/** The services the gateway's readiness (`/readyz`) waits for: every deployment runs them. */
export const ServiceNames = ['agents', 'sessions', 'playground', 'webhooks'] as const;
/** Services a deployment may leave out (no phone numbers: no telephony); `/readyz` does not wait for them. */
export const OptionalServiceNames = ['telephony'] as const;
export type ServiceName = (typeof ServiceNames)[number] | (typeof OptionalServiceNames)[number];

const AgentRef = z.object({ id: Id });
const SessionRef = z.object({ agentId: Id, sessionId: Id });
const AgentIdRef = z.object({ agentId: Id });
const CaseRef = z.object({ agentId: Id, caseId: Id });
const WebhookRef = z.object({ agentId: Id, webhookId: Id });
const Health = z.object({ service: z.string(), ok: z.literal(true) });
export const HealthRequest = z.object({});

export const TextTurnRequest = z.object({ agentId: Id, sessionId: Id, text: TextTurnBody.shape.text });
export type TextTurnRequest = z.infer<typeof TextTurnRequest>;
export const TextEndRequest = SessionRef;
export type TextEndRequest = z.infer<typeof TextEndRequest>;
/** Ends a voice session; `reason` (the `session_ended` event's) is why, when it is not a DELETE. */
export const VoiceEndRequest = TextEndRequest.extend({ reason: z.string().max(200).optional() });
export type VoiceEndRequest = z.infer<typeof VoiceEndRequest>;
/** One regression test case for a playground instance to run (the sessions service's test run sends it). */
export const RunCaseRequest = z.object({
  agentId: Id,
  version: z.number().int().positive(),
  runId: Id,
  caseId: Id,
  /** Scripted turns; empty for a simulated case. */
  turns: TestCase.shape.turns.max(50),
  temperature: TestCase.shape.temperature,
  apiKeys: ApiKeys.optional(),
  simulation: TestCase.shape.simulation.default(null),
  mocks: TestCase.shape.mocks.default({}),
  criteria: TestCase.shape.criteria.default([]),
  judgeModel: TestCase.shape.judgeModel.default(null),
  /** Checked before the judges are asked: a conversation that fails them needs no model to fail. */
  expect: TestCase.shape.expect.default({}),
  /** Which repeat this is (0-based), and the seed its agent model runs with where the provider takes one. */
  attempt: z.number().int().nonnegative().default(0),
  seed: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1)
    .optional(),
});
export type RunCaseRequest = z.infer<typeof RunCaseRequest>;

/** Ends a session on its owner: a text or voice session (with its agent) or a room session (by room name). */
export const OwnerEndRequest = z.object({
  sessionId: z.string().regex(SUBJECT_TOKEN),
  agentId: Id.optional(),
  reason: z.string().max(200).optional(),
  /** A call's `endedDetail`, forwarded with its `playground.calls.end`. */
  detail: EndedDetail.optional(),
});
export type OwnerEndRequest = z.infer<typeof OwnerEndRequest>;

/** Everything declared about a subject, once: the gateway, `serve()` and the services read it here. */
export interface SubjectSpec {
  request: z.ZodType;
  response: z.ZodType;
  /**
   * The error codes its service may answer besides the transport's own (validation, unavailable, timeout,
   * too large — the bus's and the gateway's to add).
   */
  errors: readonly ErrorCode[];
  /** A request with an Idempotency-Key is run once; a retry gets the first answer. */
  idempotent?: true;
  /** The answer carries the agent's ETag; a write may carry If-Match. */
  etag?: true;
  /** How long a caller waits for the answer; default: the caller's own (the gateway's REQUEST_TIMEOUT_MS). */
  timeoutMs?: number;
  /** What "no responders" means here, when it is not "the service is down". */
  noResponders?: { code: ErrorCode; message: string };
}

/** Every playground instance left the queue group of the subjects that start sessions: all are full. */
const AT_CAPACITY = {
  code: 'CAPACITY_EXHAUSTED',
  message: 'playground at capacity: no instance can take a new session now, retry shortly',
} as const;

/** The errors of a session start: the flow, the keys, the capacity, the media server or the model. */
const START_ERRORS = [
  'NOT_FOUND',
  'AGENT_ARCHIVED',
  'FLOW_INVALID',
  'MISSING_CREDENTIALS',
  'CAPACITY_EXHAUSTED',
  'RATE_LIMITED',
  'UPSTREAM_FAILED',
] as const;

/** One map ties each subject to its spec (`SubjectSpec`). */
export const contract = {
  [Subjects.agentsCreate]: {
    request: CreateAgentBody,
    response: Agent,
    errors: [],
    idempotent: true,
    etag: true,
  },
  [Subjects.agentsList]: { request: z.object({}), response: AgentList, errors: [] },
  [Subjects.agentsGet]: { request: AgentRef, response: Agent, errors: ['NOT_FOUND'], etag: true },
  [Subjects.agentsUpdate]: {
    request: z.object({ id: Id, ifMatch: IfMatch.optional(), patch: PatchAgentBody }),
    response: Agent,
    errors: ['NOT_FOUND', 'PRECONDITION_FAILED'],
    etag: true,
  },
  [Subjects.agentsArchive]: { request: AgentRef, response: ArchivedAgent, errors: ['NOT_FOUND'] },
  [Subjects.agentsLookup]: { request: AgentRef, response: AgentLookup, errors: [] },
  [Subjects.agentsVersionsList]: { request: AgentRef, response: VersionList, errors: ['NOT_FOUND'] },
  [Subjects.agentsVersionsGet]: {
    request: z.object({ id: Id, version: z.number().int().positive() }),
    response: AgentVersion,
    errors: ['NOT_FOUND'],
  },
  [Subjects.agentsVersionsRestore]: {
    request: z.object({ id: Id, version: z.number().int().positive(), ifMatch: IfMatch.optional() }),
    response: Agent,
    errors: ['NOT_FOUND', 'PRECONDITION_FAILED'],
    etag: true,
  },
  [Subjects.agentsVersionsDiff]: {
    request: z.object({
      id: Id,
      a: z.number().int().positive(),
      b: z.number().int().positive(),
      canvas: z.boolean(),
    }),
    response: VersionDiff,
    errors: ['NOT_FOUND'],
  },
  [Subjects.agentsHealth]: { request: HealthRequest, response: Health, errors: [] },

  [Subjects.conversationsList]: {
    request: AgentIdRef,
    response: ConversationList,
    errors: ['NOT_FOUND'],
  },
  [Subjects.conversationsAppend]: {
    request: z.object({ agentId: Id, entry: CreateConversationEntryBody }),
    response: ConversationEntry,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'LIMIT_EXCEEDED'],
  },
  [Subjects.testSessionsCreate]: {
    request: z.object({ agentId: Id, session: CreateTestSessionBody }),
    response: TestSession,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
    idempotent: true,
  },
  [Subjects.testSessionsList]: {
    request: AgentIdRef,
    response: TestSessionList,
    errors: ['NOT_FOUND'],
  },
  [Subjects.testSessionsGet]: { request: SessionRef, response: TestSession, errors: ['NOT_FOUND'] },
  [Subjects.testSessionsClose]: {
    request: SessionRef.extend({ close: CloseTestSessionBody, report: CloseReport.optional() }),
    response: TestSession,
    errors: ['NOT_FOUND', 'CONFLICT'],
  },
  /** The playground stored the session's recording: the record says so (length, size, zero). */
  [Subjects.testSessionsRecording]: {
    request: SessionRef.extend({ recording: Recording }),
    response: TestSession,
    errors: ['NOT_FOUND'],
  },
  [Subjects.messagesList]: { request: SessionRef, response: SessionMessageList, errors: ['NOT_FOUND'] },
  [Subjects.messagesAppend]: {
    request: SessionRef.extend({ message: AppendMessageBody }),
    response: AppendedMessage,
    errors: ['NOT_FOUND', 'LIMIT_EXCEEDED'],
  },
  [Subjects.deploysCreate]: {
    request: z.object({ agentId: Id, body: CreateDeployBody.default({}) }),
    response: DeployRecord,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'CONFLICT'],
    idempotent: true,
  },
  [Subjects.deploysList]: { request: AgentIdRef, response: DeployList, errors: ['NOT_FOUND'] },
  [Subjects.deploysUpdate]: {
    request: z.object({ agentId: Id, deployId: Id, update: UpdateDeployBody }),
    response: DeployRecord,
    errors: ['NOT_FOUND', 'ILLEGAL_TRANSITION', 'TESTS_NOT_PASSED', 'AGENT_ARCHIVED', 'VALIDATION_FAILED'],
  },
  /**
   * The playground, before it hosts a call: the live deploy, its caps (a refusal is recorded as a `busy` call),
   * the sealed credentials. Answered by any sessions instance (the caps are counted in Redis).
   */
  [Subjects.callsAdmit]: {
    request: AdmitCallRequest,
    response: AdmittedCall,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'CAPACITY_EXHAUSTED', 'RATE_LIMITED', 'UNAUTHORIZED'],
  },
  [Subjects.callsAppend]: {
    request: AppendCallMessageRequest,
    response: Ok,
    errors: ['NOT_FOUND', 'LIMIT_EXCEEDED'],
  },
  [Subjects.callsEnd]: { request: EndCallRequest, response: Ok, errors: ['NOT_FOUND'] },
  [Subjects.callsRecording]: { request: CallRecordingRequest, response: Ok, errors: ['NOT_FOUND'] },
  [Subjects.callsList]: { request: ListCallsRequest, response: CallList, errors: ['NOT_FOUND'] },
  [Subjects.callsGet]: { request: CallRef, response: Call, errors: ['NOT_FOUND'] },
  /** Erases a call, its transcript and its recording (a caller's request to be forgotten). */
  [Subjects.callsErase]: { request: CallRef, response: Ok, errors: ['NOT_FOUND', 'CONFLICT'] },
  [Subjects.callSettingsGet]: { request: AgentIdRef, response: CallSettings, errors: ['NOT_FOUND'] },
  [Subjects.callSettingsSet]: {
    request: z.object({ agentId: Id, settings: CallSettings.partial() }),
    response: CallSettings,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
  },
  [Subjects.analysisSettingsGet]: { request: AgentIdRef, response: AnalysisSettings, errors: ['NOT_FOUND'] },
  /** Replaces the agent's analysis settings (they apply to calls analysed from now on, re-runs too). */
  [Subjects.analysisSettingsSet]: {
    request: z.object({ agentId: Id, settings: AnalysisSettings }),
    response: AnalysisSettings,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
  },
  /** Queues a call's analysis again (after the criteria changed); an active call is a CONFLICT. */
  [Subjects.callsAnalyze]: {
    request: CallRef,
    response: AnalysisQueued,
    errors: ['NOT_FOUND', 'CONFLICT', 'SERVICE_UNAVAILABLE'],
  },
  /** The playground's analysis worker stores a result (at most one per job). */
  [Subjects.callsAnalysisStore]: {
    request: StoreAnalysisRequest,
    response: StoreAnalysisResponse,
    errors: ['NOT_FOUND'],
  },
  /** A deploy's figures from its calls (issue 47). */
  [Subjects.deployStats]: { request: DeployStatsRequest, response: DeployStats, errors: ['NOT_FOUND'] },
  /** Two deploys' figures side by side (default: the running canary against the live deploy). */
  [Subjects.deploysCompare]: {
    request: CompareDeploysRequest,
    response: DeployComparison,
    errors: ['NOT_FOUND'],
  },
  /** A canary becomes the full live deploy (the previous one `superseded`); decision 0035. */
  [Subjects.deploysPromote]: {
    request: DeployStatsRequest,
    response: DeployRecord,
    errors: ['NOT_FOUND', 'ILLEGAL_TRANSITION', 'AGENT_ARCHIVED'],
  },
  [Subjects.credentialsStatus]: { request: AgentIdRef, response: CredentialStatus, errors: ['NOT_FOUND'] },
  /** The sealed blob, for the playground only (NATS permissions): never routed. */
  [Subjects.credentialsSealed]: { request: AgentIdRef, response: SealedCredentials, errors: ['NOT_FOUND'] },
  [Subjects.credentialsStore]: {
    request: StoreCredentialsRequest,
    response: CredentialStatus,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
  },
  [Subjects.publicKeysCreate]: {
    request: z.object({ agentId: Id, body: CreatePublicKeyBody }),
    response: CreatedPublicKey,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'LIMIT_EXCEEDED'],
  },
  [Subjects.publicKeysList]: { request: AgentIdRef, response: PublicKeyList, errors: ['NOT_FOUND'] },
  [Subjects.publicKeysRevoke]: {
    request: z.object({ agentId: Id, keyId: Id }),
    response: PublicKey,
    errors: ['NOT_FOUND'],
  },
  [Subjects.publicKeysVerify]: {
    request: VerifyPublicKeyRequest,
    response: VerifiedPublicKey,
    errors: ['UNAUTHORIZED'],
  },
  /** The gateway, serving `/live/:subdomain`: does the subdomain's agent keep its public page on? */
  [Subjects.livePage]: { request: LivePageRequest, response: LivePageAnswer, errors: [] },
  [Subjects.deployGateGet]: { request: AgentIdRef, response: DeployGate, errors: ['NOT_FOUND'] },
  [Subjects.deployGateSet]: {
    request: z.object({ agentId: Id, gate: DeployGate }),
    response: DeployGate,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
  },
  [Subjects.testCasesCreate]: {
    request: z.object({ agentId: Id, body: CreateTestCaseBody }),
    response: TestCase,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'LIMIT_EXCEEDED'],
    idempotent: true,
  },
  [Subjects.testCasesList]: { request: AgentIdRef, response: TestCaseList, errors: ['NOT_FOUND'] },
  [Subjects.testCasesGet]: { request: CaseRef, response: TestCase, errors: ['NOT_FOUND'] },
  [Subjects.testCasesUpdate]: {
    request: CaseRef.extend({ update: UpdateTestCaseBody }),
    response: TestCase,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
  },
  [Subjects.testCasesDelete]: { request: CaseRef, response: Ok, errors: ['NOT_FOUND', 'AGENT_ARCHIVED'] },
  [Subjects.testRunsCreate]: {
    request: z.object({ agentId: Id, body: CreateTestRunBody }),
    response: TestRun,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'LIMIT_EXCEEDED'],
    idempotent: true,
  },
  [Subjects.testRunsList]: { request: AgentIdRef, response: TestRunList, errors: ['NOT_FOUND'] },
  [Subjects.testRunsGet]: {
    request: z.object({ agentId: Id, runId: Id, casesFrom: z.number().int().min(0).optional() }),
    response: TestRun,
    errors: ['NOT_FOUND'],
  },
  /** The versions an agent's deploy records name: what the agents service's retention must keep. */
  [Subjects.deploysPinned]: {
    request: AgentIdRef,
    response: z.object({ versions: z.array(z.number().int().positive()) }),
    errors: [],
  },
  /** The agents service's archive: the agent's live deploy goes offline (`stopped`, with the reason). */
  [Subjects.deploysStop]: { request: StopDeploysRequest, response: StoppedDeploy, errors: [] },
  [Subjects.statsVersion]: {
    request: z.object({ agentId: Id, version: z.number().int().positive() }),
    response: AgentStats,
    errors: ['NOT_FOUND'],
  },
  [Subjects.statsAgent]: {
    request: z.object({ agentId: Id, since: AgentStatsQuery.shape.since }),
    response: AgentStats,
    errors: ['NOT_FOUND'],
  },
  [Subjects.sessionsHealth]: { request: HealthRequest, response: Health, errors: [] },

  [Subjects.flowsValidate]: { request: ValidateFlowBody, response: FlowValidation, errors: [] },
  [Subjects.envKeys]: { request: z.object({}), response: ProviderKeyStatus, errors: [] },
  [Subjects.playgroundHealth]: { request: HealthRequest, response: Health, errors: [] },
  [Subjects.textSessionStart]: {
    request: z.object({ agentId: Id, body: StartTextSessionBody }),
    response: TextTurnResult,
    errors: START_ERRORS,
    idempotent: true,
    timeoutMs: 30_000,
    noResponders: AT_CAPACITY,
  },
  // a turn may take a few model calls
  [Subjects.textSessionTurn]: {
    request: TextTurnRequest,
    response: TextTurnResult,
    errors: ['NOT_FOUND'],
    timeoutMs: 60_000,
  },
  [Subjects.textSessionEnd]: { request: TextEndRequest, response: Ok, errors: [] },
  [Subjects.voiceSessionStart]: {
    request: z.object({ agentId: Id, body: StartVoiceSessionBody }),
    response: VoiceSessionStarted,
    errors: START_ERRORS,
    idempotent: true,
    timeoutMs: 30_000,
    noResponders: AT_CAPACITY,
  },
  [Subjects.voiceSessionEnd]: { request: VoiceEndRequest, response: Ok, errors: [] },
  [Subjects.agentSessionCreate]: {
    request: AgentSessionRequest,
    response: PlaygroundSession,
    errors: START_ERRORS,
    idempotent: true,
    // creating the room and waiting for the agent to join
    timeoutMs: 30_000,
    noResponders: AT_CAPACITY,
  },
  [Subjects.agentSessionEnd]: {
    request: EndAgentSessionBody,
    response: Ok,
    errors: ['UPSTREAM_FAILED'],
    timeoutMs: 15_000,
  },
  /** Asked by a test run, never routed: the caller sets its timeout (a whole conversation). */
  [Subjects.testCaseRun]: {
    request: RunCaseRequest,
    response: CaseObservation,
    errors: ['NOT_FOUND', 'FLOW_INVALID', 'MISSING_CREDENTIALS', 'CAPACITY_EXHAUSTED', 'UPSTREAM_FAILED'],
    noResponders: AT_CAPACITY,
  },
  /** One model call over the flow's description (a few seconds for a real model). */
  [Subjects.testCasesGenerate]: {
    request: z.object({ agentId: Id, body: GenerateTestCasesBody }),
    response: GeneratedTestCases,
    errors: ['NOT_FOUND', 'FLOW_INVALID', 'MISSING_CREDENTIALS', 'UPSTREAM_FAILED'],
    timeoutMs: 60_000,
  },
  /**
   * An edge starts a call of a live deploy (queue group): admitted by the sessions service, then hosted here as
   * a voice session whose id is the call's.
   */
  [Subjects.callsStart]: {
    request: StartCallRequest,
    response: CallStarted,
    errors: [
      'NOT_FOUND',
      'AGENT_ARCHIVED',
      'FLOW_INVALID',
      'MISSING_CREDENTIALS',
      'CAPACITY_EXHAUSTED',
      'RATE_LIMITED',
      'UNAUTHORIZED',
      'UPSTREAM_FAILED',
    ],
    timeoutMs: 30_000,
    noResponders: AT_CAPACITY,
  },
  /** An edge ends a call it relays (its caller hung up): forwarded to the call's owner. */
  [Subjects.callsHangUp]: {
    // `detail`: why the edge closed the caller's side (`endedDetail`, e.g. `{ kind: 'media_too_fast' }`)
    request: z.object({ agentId: Id, callId: Id, reason: EndedReason, detail: EndedDetail.optional() }),
    response: Ok,
    errors: [],
  },
  /** Seals the merged keys under CREDENTIALS_KEY and stores the blob in the sessions service. */
  [Subjects.credentialsPut]: {
    request: z.object({ agentId: Id, body: PutCredentialsBody }),
    response: CredentialStatus,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'SERVICE_UNAVAILABLE'],
  },
  /**
   * The deploy pipeline's readiness check: the pinned version as a public caller's start would run it (the
   * stored credentials and the server's keys under the key rule, never a request's).
   */
  [Subjects.deployCheck]: {
    request: z.object({ agentId: Id, version: z.number().int().positive() }),
    response: z.object({ ready: z.boolean(), issues: z.array(DeployIssue) }),
    errors: ['NOT_FOUND'],
    timeoutMs: 30_000,
  },

  [Subjects.phoneNumbersCreate]: {
    request: CreatePhoneNumberBody,
    response: PhoneNumber,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'CONFLICT'],
    idempotent: true,
  },
  [Subjects.phoneNumbersList]: { request: z.object({}), response: PhoneNumberList, errors: [] },
  [Subjects.phoneNumbersUpdate]: {
    request: z.object({ id: Id, update: UpdatePhoneNumberBody }),
    response: PhoneNumber,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED'],
  },
  [Subjects.phoneNumbersDelete]: { request: z.object({ id: Id }), response: Ok, errors: ['NOT_FOUND'] },
  [Subjects.telephonyHealth]: { request: HealthRequest, response: Health, errors: [] },
  [Subjects.webhooksCreate]: {
    request: z.object({ agentId: Id, body: CreateWebhookBody }),
    response: WebhookWithSecret,
    errors: ['NOT_FOUND', 'AGENT_ARCHIVED', 'LIMIT_EXCEEDED', 'VALIDATION_FAILED'],
    idempotent: true,
  },
  [Subjects.webhooksList]: { request: AgentIdRef, response: WebhookList, errors: ['NOT_FOUND'] },
  [Subjects.webhooksGet]: { request: WebhookRef, response: Webhook, errors: ['NOT_FOUND'] },
  [Subjects.webhooksUpdate]: {
    request: WebhookRef.extend({ update: UpdateWebhookBody }),
    response: Webhook,
    errors: ['NOT_FOUND', 'VALIDATION_FAILED'],
  },
  [Subjects.webhooksDelete]: { request: WebhookRef, response: Ok, errors: ['NOT_FOUND'] },
  [Subjects.webhooksRotate]: {
    request: WebhookRef.extend({ body: RotateWebhookSecretBody }),
    response: WebhookWithSecret,
    errors: ['NOT_FOUND'],
  },
  [Subjects.webhookDeliveriesList]: { request: WebhookRef, response: DeliveryList, errors: ['NOT_FOUND'] },
  /** A new attempt now, with the same delivery id (a receiver that has it already deduplicates). */
  [Subjects.webhookDeliveriesRedeliver]: {
    request: WebhookRef.extend({ deliveryId: Id }),
    response: Delivery,
    errors: ['NOT_FOUND', 'CONFLICT'],
  },
  [Subjects.webhooksHealth]: { request: HealthRequest, response: Health, errors: [] },
} as const satisfies Record<Subject, SubjectSpec>;

/** A subject's spec, with every optional field visible. */
export const specOf = (subject: Subject): SubjectSpec => contract[subject];

export type Contract = typeof contract;
export type RequestOf<S extends Subject> = z.input<Contract[S]['request']>;
export type ParsedRequestOf<S extends Subject> = z.output<Contract[S]['request']>;
export type ResponseOf<S extends Subject> = z.output<Contract[S]['response']>;

/** Subjects served by one service: its handler table must cover exactly these. */
export type SubjectsOf<Svc extends ServiceName> = Extract<Subject, `${Svc}.${string}`>;

export const healthSubjectOf: Record<ServiceName, Subject> = {
  agents: Subjects.agentsHealth,
  sessions: Subjects.sessionsHealth,
  playground: Subjects.playgroundHealth,
  telephony: Subjects.telephonyHealth,
  webhooks: Subjects.webhooksHealth,
};

/** NATS headers we set ourselves. */
export const Headers = {
  requestId: 'X-Request-Id',
  idempotencyKey: 'Idempotency-Key',
  idempotentReplayed: 'Idempotent-Replayed',
  etag: 'ETag',
  /**
   * Who asked, as the gateway knows it (`t:<token digest>` or `ip:<address>`, never a credential): set on
   * requests that start sessions, for the playground's per-caller quota.
   */
  caller: 'Vab-Caller',
  serviceError: 'Nats-Service-Error',
  serviceErrorCode: 'Nats-Service-Error-Code',
} as const;
