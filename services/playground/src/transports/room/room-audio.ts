import { voice } from '@livekit/agents';
import type { Room } from '@livekit/rtc-node';

export interface StartInRoomOptions {
  session: voice.AgentSession;
  room: Room;
  agent: voice.Agent;
  /**
   * Wraps the session's audio input and output with the recorder (the hosted session's `recordAudio`, the same
   * as for the voice socket); called once they are the room's and before the session reads them.
   */
  recordAudio(session: voice.AgentSession): Promise<void>;
}

/**
 * Starts a LiveKit session on a room's audio, recorded. `session.start({ agent, room })` would build the
 * room's audio (RoomIO) and start reading it in one step, so nothing can wrap it in between except a job
 * context (which brings LiveKit's recorder, not ours, and a job's worth of other behaviour: decision 0021). So
 * the room's side is built here as AgentSession builds it — the RoomIO with its default options, and the
 * SessionHost that speaks LiveKit's session protocol to the room's participant — then the recorder wraps the
 * audio RoomIO put on the session, then the session starts without a room.
 *
 * The RoomIO is still the session's own (`_roomIO`): its spans name the room's participants, its user-away
 * timer waits for one to be linked, and its close closes the RoomIO, as when LiveKit builds it.
 */
export async function startInRoom(opts: StartInRoomOptions): Promise<void> {
  const { session, room, agent } = opts;
  // RoomIO reads the session's agent as it starts (its LLM decides whether transcripts are synced to the
  // audio); AgentSession's own start sets it before it builds the RoomIO too. Before a start this only sets it.
  session.updateAgent(agent);
  const roomIO = new voice.RoomIO({ agentSession: session, room });
  const host = new voice.SessionHost(new voice.RoomSessionTransport(room, roomIO));
  try {
    roomIO.start();
    session._roomIO = roomIO;
    host.registerSession(session);
    // AgentSession closes its own host when it closes (after its close event)
    session.once(voice.AgentSessionEventTypes.Close, () => void host.close());
    await opts.recordAudio(session);
    await session.start({ agent });
    // where AgentSession starts its own host: at the end of its start
    await host.start();
  } catch (err) {
    await host.close().catch(() => undefined);
    // a failed start closes the session, and the session its RoomIO; one that failed before it did not
    if (session._roomIO === roomIO) {
      session._roomIO = undefined;
      await roomIO.close().catch(() => undefined);
    }
    throw err;
  }
}
