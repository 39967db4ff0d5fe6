import type { Flow } from '@vab/contracts';
import { LiveKitRoomAgents } from '@vab/playground';
import {
  decodeRecording,
  levelOf,
  speak,
  startLivekitFake,
  startSpeechStub,
  voiceFlow as clinicVoiceFlow,
} from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LoopbackRoom } from '../../../services/playground/test/loopback-room.js';
import { lastUserText, startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import { eventsOf, readSse } from '../../helpers/sse.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * A LiveKit room session recorded like a WebSocket one: the real LiveKitRoomAgents, through the real room
 * transport and session host, on a real rtc-node Room whose connection to a media server is replaced by a
 * loopback (none can run here; services/playground/test/loopback-room.ts). The caller's microphone reaches the
 * agent through LiveKit's RoomIO and the agent's voice leaves through the track RoomIO publishes, both as native
 * rtc-node audio in real time; the recording must hold both, where they were.
 */

const KEY = 'sk-room-recording-test-key-0123456';
const SAID = 'I would like to book an appointment please';

let stack: Stack;
let chat: Awaited<ReturnType<typeof startOpenAiStub>>;
let speech: Awaited<ReturnType<typeof startSpeechStub>>;
let fake: Awaited<ReturnType<typeof startLivekitFake>>;
const rooms: LoopbackRoom[] = [];
const roomAgents = new LiveKitRoomAgents(() => {
  const room = new LoopbackRoom();
  rooms.push(room);
  return room;
});

const voiceFlow = (): Flow => clinicVoiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });

beforeAll(async () => {
  chat = await startOpenAiStub((req) => ({ content: `Noted: ${lastUserText(req)}` }));
  speech = await startSpeechStub({ transcribe: () => SAID });
  fake = await startLivekitFake();
  stack = await startStack({ roomAgents });
});
afterAll(async () => {
  if (process.env.VOICE_DEBUG)
    console.log(stack.logs.filter((l) => /"level":(40|50)|warn|error|ecord/.test(l)).join('\n'));
  for (const room of rooms) await room.close();
  await stack?.close();
  await chat?.close();
  await speech?.close();
  await fake?.close();
});

async function startRoom(base: string, extra: Record<string, unknown> = {}) {
  const h = api(base);
  const agent = await h.post('/api/agents', { name: 'Room clinic', flow: voiceFlow() });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  const res = await h.post('/api/agent-session', {
    ...voiceFlow(),
    livekit: { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret },
    apiKeys: { openai: KEY },
    agentId,
    ...extra,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const roomName = res.body.roomName as string;
  const room = rooms.at(-1)!;
  const sessionId = (
    (await h.get(`/api/agents/${agentId}/test-sessions`)).body as { id: string; roomName: string }[]
  ).find((s) => s.roomName === roomName)!.id;
  return { h, agentId, sessionId, roomName, room };
}

/** The session's record once it is closed, and its events (the stream ends after session_ended). */
async function ended(base: string, agentId: string, sessionId: string) {
  const h = api(base);
  const path = `/api/agents/${agentId}/test-sessions/${sessionId}`;
  await vi.waitFor(async () => expect((await h.get(path)).body.status).toBe('closed'), { timeout: 15_000 });
  const events = eventsOf(await readSse(await fetch(`${base}${path}/events`)));
  return { session: (await h.get(path)).body, events };
}

describe('recordings of LiveKit room sessions', () => {
  it("records the room's audio: the caller on the left where they spoke, the agent on the right as played", async () => {
    const { h, agentId, sessionId, room } = await startRoom(stack.baseUrl);
    // the greeting plays out on the agent's track; then the caller speaks once
    await vi.waitFor(() => expect(room.heard.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    await vi.waitFor(() => expect(Date.now() - room.heard[0]!.endedAt).toBeGreaterThan(500), {
      timeout: 20_000,
    });
    const greeting = { ...room.heard[0]! };
    const utterance = speak(SAID);
    const spokeMs = (utterance.length / 16_000) * 1000;
    await room.say(utterance);
    const spokeAt = room.spokeAt!;
    // the agent answers what it heard, on its track
    await vi.waitFor(() => expect(room.heard.length).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
    await vi.waitFor(() => expect(Date.now() - room.heard[1]!.endedAt).toBeGreaterThan(300), {
      timeout: 20_000,
    });
    // the caller hangs up: LiveKit's RoomIO closes the session, and the session's stop stores the recording
    const leftAt = Date.now();
    room.leave();
    const { session, events } = await ended(stack.baseUrl, agentId, sessionId);
    const closedSeenAt = Date.now();

    // the agent heard the caller through the room, with the recorder in front of RoomIO's input
    const messages = (await h.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`)).body as {
      role: string;
      content: string;
    }[];
    expect(messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([SAID]);
    expect(events.at(-1)).toMatchObject({ type: 'session_ended', reason: 'session closed' });

    const { recording } = session as { recording: { durationMs: number; bytes: number; startedAt: number } };
    expect(recording).toEqual({
      durationMs: expect.any(Number),
      bytes: expect.any(Number),
      startedAt: expect.any(Number),
    });
    const started = events.find((e) => e.type === 'recording_started') as
      { at: number; sampleRate: number } | undefined;
    // at the rate RoomIO plays the agent's voice into the room (its default, 24 kHz)
    expect(started?.sampleRate).toBe(24_000);
    // the event's moment is the recording's zero: the same number
    expect(started!.at).toBe(recording.startedAt);
    expect(recording.bytes / (recording.durationMs / 1000)).toBeLessThanOrEqual(12_000);

    const res = await fetch(`${stack.baseUrl}/api/agents/${agentId}/test-sessions/${sessionId}/recording`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/ogg');
    const decoded = await decodeRecording(new Uint8Array(await res.arrayBuffer()));
    expect(decoded).toMatchObject({ codec: 'opus', channels: 2, sampleRate: 48_000 });
    expect(Math.abs(decoded.durationMs - recording.durationMs)).toBeLessThanOrEqual(100);
    // the file spans the session, from its start to the caller leaving: the session closes then, as soon as
    // the playground gets to it (on a loaded machine, later), and before this test saw it closed
    expect(decoded.durationMs).toBeGreaterThanOrEqual(leftAt - recording.startedAt - 100);
    expect(decoded.durationMs).toBeLessThanOrEqual(closedSeenAt - recording.startedAt + 100);

    // left: the caller, loud where their speech went into the room, quiet while the greeting played
    const rate = decoded.sampleRate;
    const at = (ms: number) => ms - recording.startedAt;
    expect(levelOf(decoded.left, rate, at(spokeAt) + 100, at(spokeAt) + spokeMs - 100)).toBeGreaterThan(500);
    expect(levelOf(decoded.left, rate, at(greeting.startedAt), at(greeting.endedAt))).toBeLessThan(200);
    // right: the agent as its track played: the greeting where it was heard, silence while the caller spoke
    expect(
      levelOf(decoded.right, rate, at(greeting.startedAt) + 200, at(greeting.endedAt) - 200),
    ).toBeGreaterThan(500);
    expect(levelOf(decoded.right, rate, at(spokeAt) + 100, at(spokeAt) + spokeMs - 100)).toBeLessThan(200);
    const reply = room.heard[1]!;
    expect(levelOf(decoded.right, rate, at(reply.startedAt) + 200, at(reply.endedAt) - 200)).toBeGreaterThan(
      500,
    );

    // RoomIO and LiveKit's session protocol still do their part in the room, as when LiveKit builds them
    expect(room.seen.attributes).toContainEqual({ 'lk.agent.state': 'speaking' });
    expect(room.seen.textStreams).toContain('lk.transcription');
    expect(room.seen.byteHandlers).toContain('lk.agent.session');
    expect(room.seen.byteStreams).toContain('lk.agent.session');
    expect(room.seen.data.some((d) => d.topic === 'agent.events' && d.payload.includes('step_change'))).toBe(
      true,
    );
    // and are closed with the session: RoomIO gives up the chat topic, the session host its own
    expect(room.seen.unregistered).toEqual(expect.arrayContaining(['lk.chat', 'lk.agent.session']));
  }, 90_000);

  it('records nothing when the start opts out (`record: false`)', async () => {
    const { h, agentId, sessionId, roomName, room } = await startRoom(stack.baseUrl, { record: false });
    await vi.waitFor(() => expect(room.heard.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    expect((await h.delete('/api/agent-session', { roomName })).body).toEqual({ ok: true });
    const { session, events } = await ended(stack.baseUrl, agentId, sessionId);
    expect(session.recording).toBeNull();
    expect(events.some((e) => e.type === 'recording_started')).toBe(false);
    const missing = await h.get(`/api/agents/${agentId}/test-sessions/${sessionId}/recording`);
    expect(missing.status).toBe(404);
  }, 60_000);
});

describe('RECORDINGS=off', () => {
  let off: Stack;
  beforeAll(async () => {
    off = await startStack({ roomAgents, playground: { RECORDINGS: 'off' } });
  });
  afterAll(async () => {
    await off?.close();
  });

  it('records no room session', async () => {
    const { h, agentId, sessionId, roomName, room } = await startRoom(off.baseUrl);
    await vi.waitFor(() => expect(room.heard.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    expect((await h.delete('/api/agent-session', { roomName })).body).toEqual({ ok: true });
    const { session, events } = await ended(off.baseUrl, agentId, sessionId);
    expect(session.recording).toBeNull();
    expect(events.some((e) => e.type === 'recording_started')).toBe(false);
  }, 60_000);
});
