import { voice, type llm } from '@livekit/agents';
import * as deepgram from '@livekit/agents-plugin-deepgram';
import * as elevenlabs from '@livekit/agents-plugin-elevenlabs';
import * as openai from '@livekit/agents-plugin-openai';
import { Room, RoomEvent } from '@livekit/rtc-node';
import type { CompiledFlow } from '@vab/flow';
import type { Logger } from 'pino';
import {
  FlowConversation,
  type RecordedMessage,
  type StepChange,
  type TransferTarget,
} from '../runtime/conversation.js';
import { createLlm, type KeyResolver } from '../runtime/providers.js';

export interface RunnerStartOptions {
  roomName: string;
  serverUrl: string;
  agentToken: string;
  flow: CompiledFlow;
  keys: KeyResolver;
  record(message: RecordedMessage): void;
  loadTransferTarget(agentId: string): Promise<TransferTarget>;
  /** The agent is gone for any reason (end step, room closed, error): the owner's stop must run. */
  onEnded(reason: string): void;
  /** The last non-agent participant left the room. */
  onUserLeft(): void;
  log: Logger;
  branchTimeoutMs: number;
  webhookTimeoutMs: number;
}

export interface RunningAgent {
  /** Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a flow's agent in a room. Behind an interface because no media server can run where the tests
 * do: the LiveKit runner below joins a real room; tests use a runner that joins nothing.
 */
export interface AgentRunner {
  start(opts: RunnerStartOptions): Promise<RunningAgent>;
}

/** Speech providers this server can run in-process, by the flow's `provider`. */
export function speechProvidersMissing(
  flow: CompiledFlow,
  keys: KeyResolver,
): { unsupported: string[]; missingKeys: string[] } {
  const tts = flow.providers.tts.provider;
  const stt = flow.providers.stt.provider;
  const unsupported = [
    ...(['elevenlabs', 'openai', 'deepgram'].includes(tts) ? [] : [`tts:${tts}`]),
    ...(['deepgram', 'openai'].includes(stt) ? [] : [`stt:${stt}`]),
  ];
  const missingKeys = [...new Set([tts, stt].filter((p) => !keys(p)))];
  return { unsupported, missingKeys };
}

function makeTts(flow: CompiledFlow, keys: KeyResolver) {
  const t = flow.providers.tts;
  const apiKey = keys(t.provider);
  if (t.provider === 'elevenlabs') return new elevenlabs.TTS({ apiKey, voiceId: t.voiceId, model: t.model });
  if (t.provider === 'deepgram') return new deepgram.TTS({ apiKey, ...(t.model ? { model: t.model } : {}) });
  return new openai.TTS({
    apiKey,
    ...(t.model ? { model: t.model } : {}),
    ...(t.voiceId ? { voice: t.voiceId as never } : {}),
  });
}

function makeStt(flow: CompiledFlow, keys: KeyResolver) {
  const s = flow.providers.stt;
  const apiKey = keys(s.provider);
  const language = s.language ?? flow.agent.language;
  if (s.provider === 'deepgram') {
    return new deepgram.STT({
      apiKey,
      language,
      ...(s.model ? { model: s.model } : {}),
      ...(s.keyterms ? { keyterm: s.keyterms } : {}),
    });
  }
  return new openai.STT({ apiKey, language, ...(s.model ? { model: s.model } : {}) });
}

/**
 * The in-process LiveKit agent: a bare `Room` (not the worker, which forks a process per job) and an
 * `AgentSession` with the flow's STT/LLM/TTS. Turn detection comes from the STT's end of speech, which
 * needs no local model. Step changes are published on the data channel for the builder to highlight.
 */
export class LiveKitAgentRunner implements AgentRunner {
  async start(opts: RunnerStartOptions): Promise<RunningAgent> {
    const room = new Room();
    let conv: FlowConversation | undefined;
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      await conv?.close().catch(() => undefined);
      await room.disconnect().catch(() => undefined);
    };
    room.on(RoomEvent.Disconnected, () => {
      void stop();
      opts.onEnded('room disconnected');
    });
    room.on(RoomEvent.ParticipantDisconnected, () => {
      const humans = [...room.remoteParticipants.values()].filter((p) => !p.identity.startsWith('agent-'));
      if (humans.length === 0) opts.onUserLeft();
    });
    try {
      await room.connect(opts.serverUrl, opts.agentToken, { autoSubscribe: true, dynacast: false });
      const publish = (change: StepChange) => {
        const data = new TextEncoder().encode(JSON.stringify({ type: 'step_change', ...change }));
        room.localParticipant
          ?.publishData(data, { reliable: true, topic: 'agent.events' })
          .catch((err: unknown) => opts.log.warn({ err: String(err) }, 'step change not published'));
      };
      const agentLlm: llm.LLM = createLlm(opts.flow.providers.llm, opts.keys);
      const session = new voice.AgentSession({
        llm: agentLlm,
        stt: makeStt(opts.flow, opts.keys),
        tts: makeTts(opts.flow, opts.keys),
        turnHandling: { turnDetection: 'stt' },
      });
      // the engine, not the framework, decides whether and how to answer a turn
      const agentRef: { conv?: FlowConversation } = {};
      class FlowVoiceAgent extends voice.Agent {
        override async onUserTurnCompleted(_ctx: llm.ChatContext, message: llm.ChatMessage): Promise<void> {
          void agentRef.conv?.userTurn(message.textContent ?? '', { inContext: true });
          throw new voice.StopResponse();
        }
      }
      const agent = new FlowVoiceAgent({
        instructions: opts.flow.agent.instructions || ' ',
        allowInterruptions: opts.flow.agent.allowInterruptions,
      });
      conv = new FlowConversation({
        flow: opts.flow,
        makeLlm: (cfg) => (cfg === opts.flow.providers.llm ? agentLlm : createLlm(cfg, opts.keys)),
        loadTransferTarget: opts.loadTransferTarget,
        record: opts.record,
        onStepChange: publish,
        onEnded: () => opts.onEnded('end step'),
        log: opts.log,
        branchTimeoutMs: opts.branchTimeoutMs,
        webhookTimeoutMs: opts.webhookTimeoutMs,
        voice: { session, agent, start: () => session.start({ agent, room }) },
      });
      agentRef.conv = conv;
      session.on(voice.AgentSessionEventTypes.Close, () => opts.onEnded('session closed'));
      await conv.start();
      return { stop };
    } catch (err) {
      await stop();
      throw err;
    }
  }
}
