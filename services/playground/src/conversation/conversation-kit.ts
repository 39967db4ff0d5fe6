import type { voice } from '@livekit/agents';
import { safeError, type BusClient, type Logger } from '@vab/bus';
import {
  AppError,
  Subjects,
  type ApiKeys,
  type CaseMocks,
  type SessionEventInput,
  type SessionMessage,
  type SessionType,
  type StepChange,
  type TurnMetrics,
} from '@vab/contracts';
import type { EgressFetch } from '../egress/client.js';
import type { KeyEnv } from '../models/provider-keys.js';
import type { ModelFactory, RunnableFlow } from '../models/model-factory.js';
import { FlowConversation, type NumberTransfer, type TransferTarget } from './conversation.js';
import type { ConversationMode } from './conversation-mode.js';
import { openFlowRuntime, type FlowAgent } from './flow-runtime.js';
import type { McpOptions, ToolObserver } from './mcp.js';
import { runPostProcessing } from './post-processing.js';

export interface ConversationKitConfig {
  BUS_TIMEOUT_MS: number;
  MCP_TIMEOUT_MS: number;
  LLM_DECISION_TIMEOUT_MS: number;
  WEBHOOK_TIMEOUT_MS: number;
}

/** What only the transport knows: its LiveKit session, how that starts, and how its turns come. */
export interface TransportSide {
  mode: ConversationMode;
  session: voice.AgentSession;
  startSession(agent: FlowAgent): Promise<void>;
  onStepChange?(change: StepChange): void;
  /** Voice: the figures the transport measures from the audio, for the turn just answered. */
  audioFigures?: () => Partial<TurnMetrics>;
  /** A phone call's transport: hands the call to a person at a number (a transfer step's `targetNumber`). */
  transferToNumber?: ((targetNumber: string) => Promise<NumberTransfer>) | undefined;
}

export interface ConverseOptions extends TransportSide {
  flow: RunnableFlow;
  /** The request's keys: a transfer's target runs with them too. Held in memory for the session only. */
  apiKeys: ApiKeys | undefined;
  record(message: SessionMessage): void;
  /** The session's event stream (the hosted session's). */
  emit(event: SessionEventInput): void;
  lastEventId(): number;
  onEnded(): void;
  log: Logger;
  requestId: string;
  /** A test case's mocks: these tools and webhooks answer what the case fixed, never the real system. */
  mocks?: CaseMocks | undefined;
}

/**
 * Makes conversations the same way for both transports: the flow's MCP tools connected, transfer targets
 * loaded over the bus and put through the same readiness check as any start, post-processing through the
 * egress-checked client.
 */
export class ConversationKit {
  constructor(
    private readonly deps: {
      bus: BusClient;
      models: ModelFactory;
      env(): Promise<KeyEnv>;
      egressFetch: EgressFetch;
      config: ConversationKitConfig;
    },
  ) {}

  private mcp(log: Logger, observer?: ToolObserver): McpOptions {
    return {
      fetch: this.deps.egressFetch,
      timeoutMs: this.deps.config.MCP_TIMEOUT_MS,
      log,
      ...(observer ? { observer } : {}),
    };
  }

  async converse(opts: ConverseOptions): Promise<FlowConversation> {
    const { config, egressFetch } = this.deps;
    const { log } = opts;
    // the flow's tools are made before the conversation that watches them: calls reach it once it exists
    const made: { conversation?: FlowConversation } = {};
    const observer: ToolObserver = {
      called: (name, args) => made.conversation?.tools.called(name, args) ?? (() => undefined),
    };
    made.conversation = new FlowConversation({
      flow: await openFlowRuntime(opts.flow, this.mcp(log, observer), opts.mocks?.tools),
      mode: opts.mode,
      session: opts.session,
      startSession: opts.startSession,
      onStepChange: opts.onStepChange,
      audioFigures: opts.audioFigures,
      record: opts.record,
      emit: opts.emit,
      lastEventId: opts.lastEventId,
      onEnded: opts.onEnded,
      transferToNumber: opts.transferToNumber,
      log,
      branchTimeoutMs: config.LLM_DECISION_TIMEOUT_MS,
      loadTransferTarget: (agentId) =>
        this.transferTarget(
          agentId,
          opts.flow.sessionType,
          opts.apiKeys,
          opts.requestId,
          log,
          observer,
          opts.mocks,
        ),
      postProcess: (steps, transcript, flow) =>
        runPostProcessing(steps, transcript, (cfg) => flow.llm(cfg ?? flow.config.providers.llm), {
          fetch: egressFetch,
          webhookTimeoutMs: config.WEBHOOK_TIMEOUT_MS,
          llmTimeoutMs: config.LLM_DECISION_TIMEOUT_MS,
          log,
          emit: opts.emit,
          webhookMocks: opts.mocks?.webhooks,
        }),
    });
    return made.conversation;
  }

  /** Another stored agent's flow, checked like any start (kind, URLs, keys) and opened; or why not. */
  private async transferTarget(
    agentId: string,
    sessionType: SessionType,
    apiKeys: ApiKeys | undefined,
    requestId: string,
    log: Logger,
    observer: ToolObserver,
    mocks: CaseMocks | undefined,
  ): Promise<TransferTarget> {
    const { bus, models, config } = this.deps;
    const opts = { timeoutMs: config.BUS_TIMEOUT_MS, requestId };
    try {
      const found = await bus.request(Subjects.agentsLookup, { id: agentId }, opts);
      if (!found.exists) return { ok: false, reason: 'missing' };
      if (found.archived) return { ok: false, reason: 'archived' };
      const { flow } = await bus.request(Subjects.agentsGet, { id: agentId }, opts);
      const runnable = models.require(flow, sessionType, await this.deps.env(), apiKeys);
      // a test case's tool mocks hold across a transfer: its conversation never reaches the real system
      return { ok: true, flow: await openFlowRuntime(runnable, this.mcp(log, observer), mocks?.tools) };
    } catch (err) {
      if (err instanceof AppError && (err.code === 'FLOW_INVALID' || err.code === 'MISSING_CREDENTIALS')) {
        log.warn(
          { code: 'TRANSFER_TARGET_UNRUNNABLE', targetAgentId: agentId, errorCode: err.code },
          'transfer target cannot run here',
        );
        return { ok: false, reason: 'invalid' };
      }
      log.warn(
        { code: 'TRANSFER_TARGET_NOT_LOADED', err: safeError(err), targetAgentId: agentId },
        'transfer target not loaded',
      );
      return { ok: false, reason: 'error' };
    }
  }
}
