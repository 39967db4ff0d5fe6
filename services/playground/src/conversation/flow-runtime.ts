import { llm, voice } from '@livekit/agents';
import type { ToolMock } from '@vab/contracts';
import type { RunnableFlow } from '../models/model-factory.js';
import type { ConversationMode } from './conversation-mode.js';
import { openMcpTools, type McpOptions } from './mcp.js';
import { SessionVad, turnHandlingOf } from '../models/voice-models.js';

/** A runnable flow opened for one session: its models, and the tools of its MCP nodes (connected). */
export interface FlowRuntime extends RunnableFlow {
  tools: llm.FunctionTool[];
  /** The session's VAD: every agent of the flow and a batch STT hear through its one stream. */
  vad: SessionVad;
  /** Disconnects its MCP servers. */
  close(): Promise<void>;
}

export async function openFlowRuntime(
  flow: RunnableFlow,
  mcp: McpOptions,
  toolMocks?: Readonly<Record<string, ToolMock>>,
): Promise<FlowRuntime> {
  const toolbox =
    flow.config.tools.length > 0
      ? await openMcpTools(flow.config.tools, mcp, toolMocks)
      : { tools: [], close: async () => undefined };
  return { ...flow, tools: toolbox.tools, vad: new SessionVad(), close: toolbox.close };
}

/**
 * Who answers a spoken turn: LiveKit itself (with the reply its preemptive generation prepared, when it did),
 * or the step engine, which LiveKit is told not to answer for.
 */
export type TurnAnswer = 'livekit' | 'engine';

/**
 * The LiveKit agent of one flow. Its own LLM, TTS, STT and interruption setting override the session's, so a
 * transfer is LiveKit's own handoff (`AgentSession.updateAgent`). `entered` resolves when the session has
 * made it the active agent. In a spoken session each finished user turn goes to `onUserTurn`, which says who
 * answers it: LiveKit, when the step only answers it under its current instructions; otherwise the step
 * engine, and the framework does not answer it.
 */
export class FlowAgent extends voice.Agent {
  readonly entered: Promise<void>;
  private markEntered!: () => void;

  constructor(
    opts: voice.AgentOptions<unknown>,
    private readonly onUserTurn?: (text: string) => TurnAnswer,
  ) {
    super(opts);
    this.entered = new Promise((resolve) => (this.markEntered = resolve));
  }

  override async onEnter(): Promise<void> {
    this.markEntered();
  }

  override async onUserTurnCompleted(_ctx: llm.ChatContext, message: llm.ChatMessage): Promise<void> {
    if (!this.onUserTurn) return;
    if (this.onUserTurn(message.textContent ?? '') === 'livekit') return;
    throw new voice.StopResponse();
  }
}

/** What LiveKit runs a flow's agent with, in this mode. */
export function agentOptions(
  flow: FlowRuntime,
  mode: ConversationMode,
  chatCtx?: llm.ChatContext,
): voice.AgentOptions<unknown> {
  const { agent, providers } = flow.config;
  return {
    instructions: agent.instructions || ' ',
    llm: flow.llm(providers.llm),
    tools: flow.tools,
    ...(chatCtx ? { chatCtx } : {}),
    ...(mode.speaks
      ? {
          tts: flow.tts(),
          stt: flow.vad.streaming(flow.stt()),
          // the agent's own (a transfer's target takes its turns its own way); one VAD stream per session
          vad: flow.vad,
          turnHandling: turnHandlingOf(agent),
          // the reply's text as the model wrote it, not the TTS's sentences: LiveKit's sentence splitter drops
          // the spaces where its sentences join ("house.To start") and moves a stop past a closing quote
          // ("pm"."), and what is stored, shown and put back into the model's context is made of this text
          useTtsAlignedTranscript: false,
        }
      : {}),
  };
}
