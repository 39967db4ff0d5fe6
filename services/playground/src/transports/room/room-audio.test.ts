import { initializeLogger, voice } from '@livekit/agents';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LoopbackRoom } from '../../../test/loopback-room.js';
import { startInRoom } from './room-audio.js';

initializeLogger({ pretty: false, level: 'silent' });

const rooms: LoopbackRoom[] = [];
afterEach(async () => {
  for (const room of rooms.splice(0)) await room.close();
});

async function connectedRoom(): Promise<LoopbackRoom> {
  const room = new LoopbackRoom();
  rooms.push(room);
  await room.connect();
  return room;
}

const textSession = () =>
  new voice.AgentSession({
    llm: new voice.testing.FakeLLM([]),
    vad: null,
    turnHandling: { turnDetection: 'manual' },
  });

describe('a session started in a room', () => {
  it("gives the recorder the room's audio before the session reads it, and keeps the RoomIO the session's", async () => {
    const room = await connectedRoom();
    const session = textSession();
    let seen: { input: unknown; output: unknown; roomIO: unknown; started: boolean } | undefined;
    await startInRoom({
      session,
      room,
      agent: new voice.Agent({ instructions: 'x' }),
      recordAudio: async (s) => {
        seen = { input: s.input.audio, output: s.output.audio, roomIO: s._roomIO, started: s._started };
      },
    });
    const roomIO = session._roomIO!;
    expect(roomIO).toBeInstanceOf(voice.RoomIO);
    // what the recorder got are RoomIO's own input and output (the synchronizer's, in front of the track)
    expect(seen).toEqual({ input: expect.anything(), output: roomIO.audioOutput, roomIO, started: false });
    expect(seen!.input!.constructor.name).toBe('ParticipantAudioInputStream');
    expect(room.seen.byteHandlers).toEqual(['lk.agent.session']);
    await session.close();
    // the session's close closes the RoomIO and the session-protocol host
    expect(session._roomIO).toBeUndefined();
    expect(room.seen.unregistered).toContain('lk.chat');
    await vi.waitFor(() => expect(room.seen.unregistered).toContain('lk.agent.session'));
  });

  it('closes the RoomIO itself when the start fails before the session could', async () => {
    const room = await connectedRoom();
    const session = textSession();
    await expect(
      startInRoom({
        session,
        room,
        agent: new voice.Agent({ instructions: 'x' }),
        recordAudio: () => Promise.reject(new Error('no recorder')),
      }),
    ).rejects.toThrow('no recorder');
    expect(session._roomIO).toBeUndefined();
    expect(room.seen.unregistered).toContain('lk.chat');
  });
});
