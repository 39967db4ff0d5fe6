import { safeError } from '@vab/bus';
import { voice } from '@livekit/agents';
import { Room, RoomEvent } from '@livekit/rtc-node';
import type { SessionMessage, StepChange } from '@vab/contracts';
import type { CompiledFlow } from '@vab/flow';
import type { Logger } from 'pino';
import type { FlowConversation } from '../../conversation/conversation.js';
import type { TransportSide } from '../../conversation/conversation-kit.js';
import { SPOKEN } from '../../conversation/conversation-mode.js';
import { spokenTextTransforms } from '../../conversation/spoken-text.js';
import { sharedVad, turnHandlingOf } from '../../models/voice-models.js';
import { startInRoom } from './room-audio.js';

export interface RoomAgentOptions {
  roomName: string;
  serverUrl: string;
  agentToken: string;
  /** The flow the agent runs. */
  flow: CompiledFlow;
  /** Builds the flow's conversation on the LiveKit session made for the room. */
  converse(side: TransportSide): Promise<FlowConversation>;
  /** Every transcript message (the conversation records through it). */
  record(message: SessionMessage): void;
  /**
   * Records the session's audio (the hosted session's `recordAudio`): called with the session once the room's
   * audio is its input and output, before it reads them.
   */
  recordAudio(session: voice.AgentSession): Promise<void>;
  /** The agent is gone for any reason (end step, room closed, error): the owner's stop must run. */
  onEnded(reason: string): void;
  /** The last non-agent participant left the room. */
  onUserLeft(): void;
  log: Logger;
}

export interface RoomAgent {
  /** Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a flow's agent in a room. Behind an interface because no media server can run where the tests
 * do: LiveKit's below joins a real room; tests use one that joins nothing.
 */
export interface RoomAgents {
  start(opts: RoomAgentOptions): Promise<RoomAgent>;
}

/**
 * The in-process LiveKit agent: a bare `Room` (not the worker, which forks a process per job) and an
 * `AgentSession` with the flow's turn handling (the local VAD and end-of-turn model, shared by the process). The agent's own
 * models come from the flow (so a transfer can swap them); step changes go out on the data channel for the
 * builder to highlight. The session's audio is the room's, and recorded as any voice session's (`startInRoom`).
 */
export class LiveKitRoomAgents implements RoomAgents {
  /** `newRoom`: where the room comes from; a test gives one whose `connect` reaches no media server. */
  constructor(private readonly newRoom: () => Room = () => new Room()) {}

  async start(opts: RoomAgentOptions): Promise<RoomAgent> {
    const room = this.newRoom();
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
          .catch((err: unknown) =>
            opts.log.warn(
              { code: 'STEP_CHANGE_NOT_PUBLISHED', err: safeError(err) },
              'step change not published',
            ),
          );
      };
      const session = new voice.AgentSession({
        vad: sharedVad(),
        turnHandling: turnHandlingOf(opts.flow.agent),
        ttsTextTransforms: spokenTextTransforms(opts.log),
      });
      conv = await opts.converse({
        mode: SPOKEN,
        session,
        startSession: (agent) => startInRoom({ session, room, agent, recordAudio: opts.recordAudio }),
        onStepChange: publish,
      });
      session.on(voice.AgentSessionEventTypes.Close, () => opts.onEnded('session closed'));
      await conv.start();
      return { stop };
    } catch (err) {
      await stop();
      throw err;
    }
  }
}
