import { decodeRecording, lastUserText, levelOf, speak, VoiceClient } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { api, startStack, type Stack } from '../../helpers/stack.js';
import { startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * Every voice session recorded: LiveKit's recorder on the real pipeline (espeak-ng speech in real time, the stub
 * providers on loopback), one stereo Ogg Opus file stored in the NATS Object Store, served with ranges, removed
 * with its session.
 */

const KEY = 'sk-recording-test-key-0123456789';
const TOKEN = 'recordings-test-token-0123456789abcdef';
const SAID = 'I would like to book an appointment please';

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof authed>;
const auth = { authorization: `Bearer ${TOKEN}` };

const voiceFlow = () => voice.flow();

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: (req) => ({ content: `Noted: ${lastUserText(req)}` }),
    transcribe: () => SAID,
    stack: {
      testSessionDays: 7,
      security: { apiTokens: [TOKEN] },
      playground: { VOICE_INPUT_IDLE_MS: 3000 },
    },
  });
  stack = voice.stack;
  http = authed(voice.http);
});
afterAll(async () => {
  if (process.env.VOICE_DEBUG)
    console.log(stack.logs.filter((l) => /"level":(40|50)|warn|error|ecord/.test(l)).join('\n'));
  await voice?.close();
});

/** The API client with the bearer token on every call. */
function authed(client: ReturnType<typeof api>) {
  return {
    get: (p: string, h: Record<string, string> = {}) => client.get(p, { ...auth, ...h }),
    post: (p: string, b?: unknown) => client.post(p, b, auth),
  };
}

interface Started {
  agentId: string;
  sessionId: string;
  client: VoiceClient;
}

async function startVoice(base: string, body: Record<string, unknown> = {}): Promise<Started> {
  const h = base === stack.baseUrl ? http : authed(api(base));
  const agent = await h.post('/api/agents', { name: 'Recorded clinic', flow: voiceFlow() });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  const started = await h.post(`/api/agents/${agentId}/voice-sessions`, {
    apiKeys: { openai: KEY },
    ...body,
  });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const { sessionId, audioPath } = started.body as { sessionId: string; audioPath: string };
  const ticket = await h.post('/api/tickets', { path: audioPath });
  const url = `${base.replace(/^http/, 'ws')}${audioPath}?ticket=${encodeURIComponent(ticket.body.ticket)}`;
  const client = new VoiceClient({ url });
  await client.ready;
  return { agentId, sessionId, client };
}

async function fetchRecording(path: string, headers: Record<string, string> = {}) {
  const res = await fetch(stack.baseUrl + path, { headers: { ...auth, ...headers } });
  return { res, body: new Uint8Array(await res.arrayBuffer()) };
}

describe('recordings of voice sessions', () => {
  let recorded: { agentId: string; sessionId: string; path: string; file: Uint8Array };

  it('records the session: stereo Opus, the user on the left where they spoke, the agent on the right', async () => {
    const { agentId, sessionId, client } = await startVoice(stack.baseUrl);
    // the greeting plays out; then the caller speaks once
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    const greeting = client.segments[0]!;
    const utterance = speak(SAID);
    const spokeAt = Date.now();
    client.say(utterance);
    const spokeMs = (utterance.length / 16_000) * 1000;
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
    const endAt = Date.now();
    client.send({ type: 'end' });
    expect((await client.closed).code).toBe(1000);
    // the recording ends when the playground takes the `end`: after it was sent, before the socket closed
    const closedAt = Date.now();

    const session = (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).body;
    const { recording } = session as { recording: { durationMs: number; bytes: number; startedAt: number } };
    expect(recording).toEqual({
      durationMs: expect.any(Number),
      bytes: expect.any(Number),
      startedAt: expect.any(Number),
    });
    const started = client.events.find((e) => e.type === 'recording_started') as
      { at: number; sampleRate: number } | undefined;
    // recorded at the call's own rate (the client's 16 kHz): neither channel resampled again
    expect(started?.sampleRate).toBe(16_000);
    // the event's moment is the recording's zero: the same number
    expect(started?.at).toBe(recording.startedAt);
    // a 12 KB/s bound on what a second of call costs to keep
    expect(recording.bytes / (recording.durationMs / 1000)).toBeLessThanOrEqual(12_000);

    const path = `/api/agents/${agentId}/test-sessions/${sessionId}/recording`;
    const { res, body } = await fetchRecording(path);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/ogg');
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('etag')).toMatch(/^"SHA-256=/);
    expect(body.byteLength).toBe(recording.bytes);
    recorded = { agentId, sessionId, path, file: body };

    const decoded = await decodeRecording(body);
    // Opus decodes at 48 kHz whatever it was encoded from
    expect(decoded).toMatchObject({ codec: 'opus', channels: 2, sampleRate: 48_000 });
    // the record's length is the file's, and the file spans the session from its start to its end
    expect(Math.abs(decoded.durationMs - recording.durationMs)).toBeLessThanOrEqual(100);
    expect(decoded.durationMs).toBeGreaterThanOrEqual(endAt - recording.startedAt - 100);
    expect(decoded.durationMs).toBeLessThanOrEqual(closedAt - recording.startedAt + 100);

    // left: the caller, loud where the speech went in and quiet while the greeting played. Quiet is below 200
    // (about −44 dBFS) against ~2,800 for speech: Opus at 32 kbit/s codes the two channels jointly, and a
    // loud channel bleeds into a silent one at ~−35 dB (measured 52)
    const rate = decoded.sampleRate;
    const spoke = spokeAt - recording.startedAt;
    expect(levelOf(decoded.left, rate, spoke + 100, spoke + spokeMs - 100)).toBeGreaterThan(500);
    const greetingAt = client.connectedAt + greeting.startedAt - recording.startedAt;
    expect(levelOf(decoded.left, rate, greetingAt, greetingAt + greeting.playedMs)).toBeLessThan(200);
    // right: the agent, as played: its greeting where the client played it, silence while the caller spoke
    expect(
      levelOf(decoded.right, rate, greetingAt + 200, greetingAt + greeting.playedMs - 200),
    ).toBeGreaterThan(500);
    expect(levelOf(decoded.right, rate, spoke + 100, spoke + spokeMs - 100)).toBeLessThan(200);
  }, 90_000);

  it('serves byte ranges (first, middle, last) with the same bytes, 416 outside, 304 when unchanged', async () => {
    const { path, file } = recorded;
    const size = file.byteLength;
    for (const [range, from, to] of [
      ['bytes=0-99', 0, 99],
      [
        `bytes=${Math.floor(size / 2)}-${Math.floor(size / 2) + 999}`,
        Math.floor(size / 2),
        Math.floor(size / 2) + 999,
      ],
      ['bytes=-100', size - 100, size - 1],
      [`bytes=${size - 10}-`, size - 10, size - 1],
    ] as const) {
      const { res, body } = await fetchRecording(path, { range });
      expect(res.status, range).toBe(206);
      expect(res.headers.get('content-range')).toBe(`bytes ${from}-${to}/${size}`);
      expect(Buffer.from(body).equals(Buffer.from(file.subarray(from, to + 1))), range).toBe(true);
    }
    const outside = await fetchRecording(path, { range: `bytes=${size}-` });
    expect(outside.res.status).toBe(416);
    expect(outside.res.headers.get('content-range')).toBe(`bytes */${size}`);
    const etag = outside.res.headers.get('etag') ?? (await fetchRecording(path)).res.headers.get('etag')!;
    expect((await fetchRecording(path, { 'if-none-match': etag })).res.status).toBe(304);
    // If-None-Match compares weakly: the same tag marked weak (a cache's or a proxy's) is the same file
    expect((await fetchRecording(path, { 'if-none-match': `"x", W/${etag}` })).res.status).toBe(304);
    expect((await fetchRecording(path, { 'if-none-match': 'W/"SHA-256=other"' })).res.status).toBe(200);
    // an If-Range that no longer matches gets the whole file
    const stale = await fetchRecording(path, { range: 'bytes=0-9', 'if-range': '"SHA-256=stale"' });
    expect(stale.res.status).toBe(200);
    expect(stale.body.byteLength).toBe(size);
  });

  it('opens for an <audio> element with a ticket, for every range it asks until the ticket expires', async () => {
    const { path, file } = recorded;
    const ticket = (await http.post('/api/tickets', { path })).body.ticket as string;
    const url = `${stack.baseUrl}${path}?ticket=${encodeURIComponent(ticket)}`;
    const first = await fetch(url, { headers: { range: 'bytes=0-' } });
    expect(first.status).toBe(206);
    expect((await first.arrayBuffer()).byteLength).toBe(file.byteLength);
    // a seek: the same URL again
    const seek = await fetch(url, { headers: { range: 'bytes=100-199' } });
    expect(seek.status).toBe(206);
    await seek.arrayBuffer();
    // without a ticket or a token: refused
    expect((await fetch(stack.baseUrl + path)).status).toBe(401);
    // a ticket for another path does not open it
    const other = (
      await http.post('/api/tickets', { path: `${path.replace(/[^/]+\/recording$/, '')}x/recording` })
    ).body.ticket as string;
    expect((await fetch(`${stack.baseUrl}${path}?ticket=${encodeURIComponent(other)}`)).status).toBe(401);
  });

  it('answers 404 for a session without a recording: opted out, or not a voice session', async () => {
    const { agentId, sessionId, client } = await startVoice(stack.baseUrl, { record: false });
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    client.send({ type: 'end' });
    await client.closed;
    expect(client.events.some((e) => e.type === 'recording_started')).toBe(false);
    const session = (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).body;
    expect(session.recording).toBeNull();
    const missing = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/recording`);
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('NOT_FOUND');
    // another agent's id with this session's: not found either
    const elsewhere = await http.get(`/api/agents/${recorded.agentId}/test-sessions/${sessionId}/recording`);
    expect(elsewhere.status).toBe(404);
  }, 60_000);

  it('is removed with its session by retention', async () => {
    const { agentId, sessionId, path } = recorded;
    const eightDaysAgo = Date.now() - 8 * 24 * 3600 * 1000;
    await stack.redis.zadd(`ss:{${agentId}}:ts`, eightDaysAgo, sessionId);
    expect(await stack.services.sessions.sessions!.retention.sweep()).toBeGreaterThanOrEqual(1);
    expect((await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).status).toBe(404);
    expect((await fetchRecording(path)).res.status).toBe(404);
  });
});

describe('RECORDINGS=off', () => {
  let off: Stack;
  beforeAll(async () => {
    off = await startStack({ security: { apiTokens: [TOKEN] }, playground: { RECORDINGS: 'off' } });
  });
  afterAll(async () => {
    await off?.close();
  });

  it('records nothing', async () => {
    const { agentId, sessionId, client } = await startVoice(off.baseUrl);
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    client.send({ type: 'end' });
    await client.closed;
    const h = authed(api(off.baseUrl));
    expect((await h.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).body.recording).toBeNull();
    expect((await h.get(`/api/agents/${agentId}/test-sessions/${sessionId}/recording`)).status).toBe(404);
    expect(client.events.some((e) => e.type === 'recording_started')).toBe(false);
  }, 60_000);

  it('records no call of a live deploy either', async () => {
    const h = authed(api(off.baseUrl));
    const agentId = (await h.post('/api/agents', { name: 'Unrecorded line', flow: voiceFlow() })).body
      .id as string;
    expect((await h.post(`/api/agents/${agentId}/deploys`, {})).status).toBe(201);
    await expect
      .poll(async () => (await h.get(`/api/agents/${agentId}/deploys`)).body[0]?.status, { timeout: 30_000 })
      .toBe('live');
    const { subdomain } = (await h.get(`/api/agents/${agentId}/deploys`)).body[0] as { subdomain: string };
    const res = await fetch(`${off.baseUrl}/live/${subdomain}/calls`, { method: 'POST' });
    const { callId, audioPath } = (await res.json()) as { callId: string; audioPath: string };
    expect(res.status).toBe(201);
    const client = new VoiceClient({ url: off.baseUrl.replace(/^http/, 'ws') + audioPath });
    await client.ready;
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    client.send({ type: 'end' });
    await client.closed;
    // a recording starts before the greeting plays: none started
    expect(client.events.some((e) => e.type === 'recording_started')).toBe(false);
    await expect
      .poll(async () => (await h.get(`/api/agents/${agentId}/calls/${callId}`)).body.status, {
        timeout: 15_000,
      })
      .toBe('ended');
    expect((await h.get(`/api/agents/${agentId}/calls/${callId}`)).body.recording).toBeNull();
    expect((await h.get(`/api/agents/${agentId}/calls/${callId}/recording`)).status).toBe(404);
  }, 90_000);
});
