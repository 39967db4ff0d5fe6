import type { Flow } from '@vab/contracts';
import { loadConfig } from '@vab/playground';
import {
  lastUserText,
  speak,
  speakWithPause,
  startDeepgramStub,
  textOf,
  VoiceClient,
  type OpenAiStub,
  type SpeechStub,
} from '@vab/testkit';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { api, startStack, type Stack } from '../../helpers/stack.js';
import { scriptedHearing, startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * Voice over the gateway's WebSocket, on real audio: espeak-ng speech streamed in real time, LiveKit's pipeline
 * (VAD, end-of-turn model, STT, LLM, TTS, interruptions) running for real in the playground, OpenAI's speech
 * and chat protocols spoken by stubs on loopback.
 */

const KEY = 'sk-voice-test-key-0123456789';
/** Three sentences: where they join, what is stored keeps the model's own spaces. */
const LONG_REPLY =
  'Of course, I can help. We have appointments on Monday, Tuesday and Wednesday mornings. On Thursday ' +
  'afternoon our doctors can see you for a check up, a vaccination or a longer consultation.';
const FIRST = 'I would like to book an appointment please';
const SECOND = 'Stop. What time is it?';
/** A closing quote after a full stop: LiveKit's sentence splitter moves the stop past the quote. */
const QUOTED = 'The doctor said "come in at seven pm." Shall I book that for you on Monday morning?';
const ASKS_QUOTE = 'What did the doctor say';
const GREETING =
  'Hello and welcome to the clinic, I am the booking assistant. I can find you an appointment with any ' +
  'of our doctors on any day of the week. How can I help?';

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof api>;
let chat: OpenAiStub;
let speech: SpeechStub;
/** What the stub STT answers for each utterance the next session sends, in order. */
const hearing = scriptedHearing();

const voiceFlow = (turns: Record<string, unknown> = {}): Flow => voice.flow(turns);

beforeAll(async () => {
  voice = await startVoiceStack({
    chat: (req) =>
      lastUserText(req).includes('appointment')
        ? { content: LONG_REPLY }
        : lastUserText(req) === ASKS_QUOTE
          ? { content: QUOTED }
          : { content: `ok: ${lastUserText(req)}` },
    transcribe: hearing.transcribe,
    // a client that sends nothing for this long is gone (real clients send silence, not nothing); one that
    // connects late is connected well within the connect bound even on a loaded machine, where the upgrade
    // itself can take seconds
    stack: { playground: { VOICE_INPUT_IDLE_MS: 2500, VOICE_CONNECT_TIMEOUT_MS: 8000 } },
  });
  ({ stack, http, chat, speech } = voice);
});
afterAll(async () => {
  if (process.env.VOICE_DEBUG)
    console.log(stack.logs.filter((l) => /"level":(40|50)|warn|error/.test(l)).join('\n'));
  await voice?.close();
});

async function startVoice(flow: Flow) {
  const agent = await http.post('/api/agents', { name: 'Voice clinic', flow });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  const started = await http.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const { sessionId, audioPath, audio } = started.body as {
    sessionId: string;
    audioPath: string;
    audio: { sampleRate: number; frameBytes: number };
  };
  expect(audio).toEqual({ sampleRate: 16000, frameMs: 20, frameBytes: 640 });
  const client = new VoiceClient({ url: stack.baseUrl.replace(/^http/, 'ws') + audioPath });
  await client.ready;
  return { agentId, sessionId, client };
}

describe('voice sessions over the WebSocket', () => {
  it('holds a two-turn spoken conversation with a barge-in, keeping only what was heard', async () => {
    hearing.willHear(FIRST, SECOND);
    // Festival's voice, whose end of sentence the end-of-turn model hears (the turn ends minEndpointingDelay
    // after it, not maxEndpointingDelay): the response figures are a caller's. Made before the session starts:
    // it takes a while, and this process runs the stack too
    const first = speak(FIRST, { voice: 'festival' });
    const { agentId, sessionId, client } = await startVoice(voiceFlow());
    // the greeting plays out, then the caller speaks
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    client.say(first);
    // the long answer starts playing; the caller talks over it 1.5 s in (the wait is the barge-in's timing)
    await vi.waitFor(() => expect(client.playing).toBe(true), { timeout: 20_000 });
    await new Promise((r) => setTimeout(r, 1500));
    client.say(speak(SECOND));
    await vi.waitFor(() => expect(client.segments.some((s) => s.interrupted)).toBe(true), {
      timeout: 15_000,
    });
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(3), { timeout: 20_000 });
    client.send({ type: 'end' });
    expect((await client.closed).code).toBe(1000);

    const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
    const said = messages.body as { role: string; content: string; metrics?: Record<string, number> }[];
    expect(said.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'user', 'assistant']);
    expect(said[1]!.content).toBe(FIRST);
    // cut where playback stopped: a start of the long reply, not all of it, its sentences joined as written
    const cut = said[2]!.content;
    expect(cut).toContain('help. We');
    expect(cut.length).toBeLessThan(LONG_REPLY.length * 0.7);
    expect(LONG_REPLY.startsWith(cut)).toBe(true);
    expect(said[3]!.content).toBe(SECOND);
    expect(said[4]!.content).toBe(`ok: ${SECOND}`);
    // figures from the real pipeline, every documented one on both sides of the barge-in: the reply that was
    // cut (measured from the turn it answered) and the reply to the barge-in
    for (const m of [said[2]!, said[4]!]) {
      const figures = m.metrics ?? {};
      expect(Object.keys(figures).sort(), m.content).toEqual([
        'e2eLatencyMs',
        'endOfTurnDelayMs',
        'llmTtftMs',
        'responseMs',
        'transcriptionDelayMs',
        'ttsTtfbMs',
      ]);
      // the caller-felt response time is plausible, and comes after the turn ended
      expect(figures.responseMs).toBeGreaterThan(200);
      expect(figures.responseMs).toBeLessThan(8000);
      expect(figures.responseMs).toBeGreaterThanOrEqual(figures.endOfTurnDelayMs!);
      expect(figures.endOfTurnDelayMs).toBeGreaterThanOrEqual(figures.transcriptionDelayMs!);
    }
    // the client was told of each pause and resume once (LiveKit pauses on every VAD inference of the barge-in)
    const pauses = client.controls.filter((c) => c === 'playback_pause' || c === 'playback_resume');
    expect(pauses[0]).toBe('playback_pause');
    expect(
      pauses.every((c, i) => i === 0 || c !== pauses[i - 1]),
      pauses.join(' '),
    ).toBe(true);
    // the key went to the stubs (the request's key rule), and nowhere into the events
    expect(speech.requests.speech[0]!.authorization).toBe(`Bearer ${KEY}`);
    expect(JSON.stringify(client.events)).not.toContain(KEY);
    const states = client.events.filter((e) => e.type === 'agent_state').map((e) => e.state);
    expect(states).toEqual(expect.arrayContaining(['listening', 'thinking', 'speaking']));
  }, 90_000);
});

describe('what a voice session stores is what was heard, as the model wrote it', () => {
  it('a greeting talked over is kept as far as it was heard; a quoted sentence keeps its quote and stop', async () => {
    hearing.willHear(ASKS_QUOTE, ASKS_QUOTE);
    const flow = voiceFlow();
    flow.nodes = flow.nodes.map((n) => (n.id === 'start' ? { ...n, command: GREETING } : n));
    const chatFrom = chat.requests.length;
    const { agentId, sessionId, client } = await startVoice(flow);
    // the caller talks over the greeting 1.5 s into it (the wait is the barge-in's timing)
    await vi.waitFor(() => expect(client.playing).toBe(true), { timeout: 20_000 });
    await new Promise((r) => setTimeout(r, 1500));
    client.say(speak(ASKS_QUOTE));
    await vi.waitFor(() => expect(client.segments.some((s) => s.interrupted)).toBe(true), {
      timeout: 15_000,
    });
    // the answer plays out whole
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
    await vi.waitFor(
      () => expect(client.events.some((e) => e.type === 'agent_reply' && e.text === QUOTED)).toBe(true),
      { timeout: 5000 },
    );
    client.send({ type: 'end' });
    expect((await client.closed).code).toBe(1000);

    const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
    const said = (messages.body as { role: string; content: string }[]).map((m) => m.content);
    expect(said).toHaveLength(3);
    const [greeting, asked, answer] = said as [string, string, string];
    expect(greeting.length).toBeGreaterThan(0);
    expect(greeting.length).toBeLessThan(GREETING.length * 0.7);
    expect(GREETING.startsWith(greeting)).toBe(true);
    expect(asked).toBe(ASKS_QUOTE);
    expect(answer).toBe(QUOTED);
    // its events say so too (a console replaying them marks it cut): the deltas streamed all of it, the final
    // reply under the same id is what was heard
    const first = client.events.find((e) => e.type === 'agent_reply')!;
    expect(first.text).toBe(greeting);
    const streamed = client.events
      .filter((e) => e.type === 'agent_reply_delta' && e.replyId === first.replyId)
      .map((e) => e.delta as string)
      .join('');
    expect(streamed).toBe(GREETING);
    // and the model was told only what the caller heard of it (the request that answered: a preemptive one,
    // made before the turn ended under the greeting's step, was not used)
    const answering = chat.requests
      .slice(chatFrom)
      .filter((r) => lastUserText(r) === ASKS_QUOTE)
      .at(-1)!;
    const before = answering.messages.filter((m) => m.role === 'assistant').map((m) => textOf(m.content));
    expect(before).toEqual([greeting]);
  }, 60_000);
});

/** A bare socket on a session's audio path: what a broken or hostile client does with it. */
function rawSocket(audioPath: string) {
  const ws = new WebSocket(stack.baseUrl.replace(/^http/, 'ws') + audioPath);
  const messages: { type: string; event?: { type: string } }[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  // an upgrade answered over HTTP instead: its status and error code
  const refused = new Promise<{ status: number; code: string }>((resolve) =>
    ws.on('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, code: (JSON.parse(body) as { code: string }).code }),
      );
      req.on('error', () => undefined);
    }),
  );
  ws.on('error', () => undefined);
  const ready = new Promise<void>((resolve) =>
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const m = JSON.parse(data.toString()) as { type: string; event?: { type: string } };
      messages.push(m);
      if (m.type === 'ready') resolve();
    }),
  );
  return {
    ws,
    closed,
    ready,
    refused,
    /** The first JSON message the server sent, if any. */
    first: () => messages[0],
    /** The types of the session's events the socket carried. */
    events: () => messages.flatMap((m) => (m.type === 'event' && m.event ? [m.event.type] : [])),
  };
}

/**
 * What the kernel holds of a socket's unread bytes before a sender's own buffer grows: the sender's send
 * buffer (autotuned up to tcp_wmem's maximum) and the receiver's receive buffer (its default: it grows only
 * as it is read).
 */
function kernelSocketBytes(): number {
  const limit = (name: string, at: number, otherwise: number) => {
    try {
      return Number(readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[at]) || otherwise;
    } catch {
      return otherwise;
    }
  };
  return limit('tcp_wmem', 2, 4 * 1024 * 1024) + limit('tcp_rmem', 1, 128 * 1024);
}

async function startedSession() {
  const agent = await http.post('/api/agents', { name: 'Voice clinic', flow: voiceFlow() });
  const agentId = agent.body.id as string;
  const started = await http.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
  expect(started.status).toBe(201);
  return { agentId, ...(started.body as { sessionId: string; audioPath: string }) };
}

async function sessionRecord(agentId: string, sessionId: string) {
  return (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).body as {
    status: string;
    sessionType: string;
  };
}

describe('speech providers at their own URLs: the key rule and the egress policy', () => {
  const validate = async (patch: Record<string, Record<string, unknown>>) => {
    const flow = voiceFlow();
    flow.nodes = flow.nodes.map((n) => ({ ...n, ...patch[n.id] }));
    const res = await http.post('/api/flows/validate', { ...flow, sessionType: 'voice' });
    expect(res.status).toBe(200);
    return res.body as {
      valid: boolean;
      issues: { code: string; nodeId?: string }[];
      requirements: { provider: string; key: string }[];
    };
  };

  it('validate: an internal address is refused, a provider whose client we cannot check takes none', async () => {
    expect(await validate({ stt: { baseURL: 'http://10.1.2.3/v1' } })).toMatchObject({
      valid: false,
      issues: [{ code: 'URL_NOT_ALLOWED', nodeId: 'stt' }],
    });
    expect(
      (await validate({ stt: { provider: 'deepgram', baseURL: 'http://stt.example.test/' } })).issues,
    ).toEqual([expect.objectContaining({ code: 'BASE_URL_UNSUPPORTED', nodeId: 'stt' })]);
    expect((await validate({ stt: { mode: 'realtime' } })).issues).toEqual([
      expect.objectContaining({ code: 'BASE_URL_UNSUPPORTED', nodeId: 'stt' }),
    ]);
    expect((await validate({ tts: { baseURL: 'http://169.254.169.254/v1' } })).issues).toEqual([
      expect.objectContaining({ code: 'URL_NOT_ALLOWED', nodeId: 'tts' }),
    ]);
    // a flow's own speech URL never gets the server's key: it runs with the request's, or keyless
    expect((await validate({})).requirements).toEqual([
      expect.objectContaining({ provider: 'openai', key: 'none' }),
    ]);
  });

  it('at run time, a speech URL whose name resolves inside is refused when connecting', async () => {
    const s = await startStack({
      playground: { FLOW_EGRESS_ALLOW: loadConfig({ FLOW_EGRESS_ALLOW: 'chat.test' }).FLOW_EGRESS_ALLOW },
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    try {
      const h = api(s.baseUrl);
      const flow = voiceFlow();
      const named = (url: string, name: string) => url.replace('127.0.0.1', name);
      flow.nodes = flow.nodes.map((n) =>
        n.id === 'llm'
          ? { ...n, baseURL: named(chat.baseURL, 'chat.test') }
          : n.id === 'tts' || n.id === 'stt'
            ? { ...n, baseURL: named(speech.baseURL, 'speech.test') }
            : n,
      );
      const agentId = (await h.post('/api/agents', { name: 'Rebind', flow })).body.id as string;
      const before = speech.requests.speech.length;
      const started = await h.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } });
      expect(started.status).toBe(201); // a name is checked when connecting, not before
      const client = new VoiceClient({
        url: s.baseUrl.replace(/^http/, 'ws') + String(started.body.audioPath),
      });
      await client.ready;
      await vi.waitFor(() => expect(client.events.some((e) => e.type === 'error')).toBe(true), {
        timeout: 10_000,
      });
      expect(speech.requests.speech.length).toBe(before);
      expect(s.logs.some((l) => l.includes('FLOW_EGRESS_REFUSED') && l.includes('speech.test'))).toBe(true);
      client.close();
    } finally {
      await s.close();
    }
  });
});

describe("the default STT provider's own protocol: Deepgram's live WebSocket", () => {
  it('streams the caller to Deepgram, shows interim transcripts, and answers the final one', async () => {
    const deepgram = await startDeepgramStub({ transcribe: () => FIRST });
    try {
      const flow = voiceFlow();
      flow.nodes = flow.nodes.map((n) =>
        n.id === 'stt' ? { id: 'stt', nodeType: 'stt', provider: 'deepgram', baseURL: deepgram.baseURL } : n,
      );
      const agent = await http.post('/api/agents', { name: 'Deepgram clinic', flow });
      const agentId = agent.body.id as string;
      const started = await http.post(`/api/agents/${agentId}/voice-sessions`, {
        apiKeys: { openai: KEY, deepgram: 'dg-key-0123456789' },
      });
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      const client = new VoiceClient({
        url: stack.baseUrl.replace(/^http/, 'ws') + String(started.body.audioPath),
      });
      await client.ready;
      await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
      client.say(speak(FIRST));
      await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
      // the caller hangs up once the reply has played and shown; its message is stored after the client's
      // playback report reaches LiveKit, so the transcript is read once the session is over (its record closes
      // after its last message is written), not as soon as the socket closed
      await vi.waitFor(
        () => expect(client.events.some((e) => e.type === 'agent_reply' && e.text === LONG_REPLY)).toBe(true),
        { timeout: 5000 },
      );
      client.close();
      await client.closed;
      const sessionId = String(started.body.sessionId);
      await vi.waitFor(async () => expect((await sessionRecord(agentId, sessionId)).status).toBe('closed'), {
        timeout: 10_000,
      });
      const [stream] = deepgram.streams;
      expect(stream!.authorization).toBe('Token dg-key-0123456789');
      expect(Object.fromEntries(stream!.query)).toMatchObject({ encoding: 'linear16', sample_rate: '16000' });
      const userTurns = client.events.filter((e) => e.type === 'user_turn');
      expect(userTurns.some((e) => e.final === false)).toBe(true);
      expect(userTurns.filter((e) => e.final === true).map((e) => e.text)).toEqual([FIRST]);
      const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
      expect((messages.body as { role: string; content: string }[]).map((m) => m.content)).toEqual([
        'Hello, how can I help?',
        FIRST,
        LONG_REPLY,
      ]);
    } finally {
      await deepgram.close();
    }
  }, 60_000);

  it('a flow may point it only at an address: its plugin connects by itself', async () => {
    const flow = voiceFlow();
    flow.nodes = flow.nodes.map((n) =>
      n.id === 'stt'
        ? { id: 'stt', nodeType: 'stt', provider: 'deepgram', baseURL: 'http://localhost:9/' }
        : n,
    );
    const res = await http.post('/api/flows/validate', { ...flow, sessionType: 'voice' });
    expect(res.body.issues).toEqual([
      expect.objectContaining({
        code: 'BASE_URL_UNSUPPORTED',
        nodeId: 'stt',
        message: expect.stringContaining('address'),
      }),
    ]);
  });
});

describe("the end-of-turn model decides when the caller's turn ends", () => {
  const MAX_ENDPOINTING_DELAY = 6000;

  /**
   * The caller pauses 1.3 s mid-sentence, after "like to" (Festival's voice, whose sentence ends the model hears
   * as such: espeak-ng's it scores as unfinished, so every turn would wait maxEndpointingDelay); what turns did
   * the agent hear, and how long after the sentence's end did the last one end?
   */
  async function turnsWith(turnDetection: 'model' | 'vad') {
    hearing.willHear('I would like to', 'book a table for two on Tuesday please');
    // made before the session starts: Festival takes a while, and this process runs the stack too
    const line = speakWithPause('I would like to book a table for two on Tuesday please.', 4, 1300);
    const { agentId, sessionId, client } = await startVoice(
      voiceFlow({ turnDetection, minEndpointingDelay: 500, maxEndpointingDelay: MAX_ENDPOINTING_DELAY }),
    );
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    client.say(line);
    // the answer to the sentence's end has played out
    await vi.waitFor(
      () =>
        expect(
          client.events.some((e) => e.type === 'agent_reply' && String(e.text).endsWith('Tuesday please')),
        ).toBe(true),
      { timeout: 20_000 },
    );
    await vi.waitFor(() => expect(client.playing).toBe(false), { timeout: 20_000 });
    // past maxEndpointingDelay: no turn is still pending
    await new Promise((r) => setTimeout(r, MAX_ENDPOINTING_DELAY + 1000));
    client.close();
    await client.closed;
    const messages = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/messages`);
    const said = messages.body as { role: string; content: string; metrics?: Record<string, number> }[];
    return {
      turns: said.filter((m) => m.role === 'user').map((m) => m.content),
      endOfTurnDelayMs: said.filter((m) => m.role === 'assistant').at(-1)?.metrics?.endOfTurnDelayMs,
    };
  }

  it("a pause inside a sentence does not end the turn, the sentence's end does at once; on silence alone the pause does", async () => {
    const model = await turnsWith('model');
    expect(model.turns).toEqual(['I would like to book a table for two on Tuesday please']);
    // the model heard the sentence end: the turn ended without waiting out maxEndpointingDelay (it ends
    // minEndpointingDelay after the speech when the model says so; the bound leaves room for a loaded machine)
    expect(model.endOfTurnDelayMs).toBeLessThan(MAX_ENDPOINTING_DELAY / 2);
    expect((await turnsWith('vad')).turns).toEqual([
      'I would like to',
      'book a table for two on Tuesday please',
    ]);
  }, 120_000);
});

describe('voice sessions refuse bad input with a close code and a reason', () => {
  it('a frame of the wrong size', async () => {
    const { agentId, sessionId, audioPath } = await startedSession();
    const c = rawSocket(audioPath);
    await c.ready;
    c.ws.send(Buffer.alloc(100));
    expect(await c.closed).toEqual({ code: 4400, reason: expect.stringContaining('640 bytes') as string });
    await vi.waitFor(async () => expect((await sessionRecord(agentId, sessionId)).status).toBe('closed'), {
      timeout: 5000,
    });
  });

  it('garbage instead of a protocol message', async () => {
    const { audioPath } = await startedSession();
    const c = rawSocket(audioPath);
    await c.ready;
    c.ws.send('{"type":"hello"');
    expect((await c.closed).code).toBe(4400);
  });

  it('audio faster than real time beyond the burst', async () => {
    const { audioPath } = await startedSession();
    const c = rawSocket(audioPath);
    await c.ready;
    for (let i = 0; i < 200; i++) c.ws.send(Buffer.alloc(640));
    expect(await c.closed).toEqual({ code: 4429, reason: expect.stringContaining('real time') as string });
  });

  it("a client that stops reading the agent's audio: closed with 4408 past 1 MiB unread, others unharmed", async () => {
    // a greeting longer than the kernel's socket buffers on both ends hold plus the gateway's 1 MiB bound, asked
    // for at 48 kHz (96 KB a second), and sent as fast as the TTS makes it
    const perCopy = speak(LONG_REPLY, 48_000).byteLength;
    const copies = Math.ceil((1.5 * (kernelSocketBytes() + 1024 * 1024)) / perCopy);
    const flow = voiceFlow();
    const greeting = Array.from({ length: copies }, () => LONG_REPLY).join(' ');
    flow.nodes = flow.nodes.map((n) => (n.id === 'start' ? { ...n, command: greeting } : n));
    const agentId = (await http.post('/api/agents', { name: 'Talkative', flow })).body.id as string;
    const started = await http.post(`/api/agents/${agentId}/voice-sessions`, {
      apiKeys: { openai: KEY },
      audio: { sampleRate: 48_000 },
    });
    expect(started.status).toBe(201);
    const { sessionId, audioPath, audio } = started.body as {
      sessionId: string;
      audioPath: string;
      audio: { frameBytes: number };
    };
    const stalled = rawSocket(audioPath);
    await stalled.ready;
    // it stops reading at once (its socket paused: what arrives stays in the kernel's buffers, then in the
    // gateway's), but goes on sending its microphone in real time: neither idle nor gone
    stalled.ws.pause();
    const mic = setInterval(() => {
      if (stalled.ws.readyState === WebSocket.OPEN) stalled.ws.send(Buffer.alloc(audio.frameBytes));
    }, 20);
    let other: Awaited<ReturnType<typeof startVoice>> | undefined;
    try {
      // meanwhile another caller, on the same gateway, hears their greeting as usual
      other = await startVoice(voiceFlow());
      const { client } = other;
      await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
      // the stalled client's session ends before its greeting could have played out (96 bytes a ms at 48 kHz:
      // over a minute; ~5 s on a quiet machine), and says why
      await vi.waitFor(async () => expect((await sessionRecord(agentId, sessionId)).status).toBe('closed'), {
        timeout: (copies * perCopy) / 96,
        interval: 200,
      });
      const events = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/events`);
      expect(String(events.body)).toMatch(
        /"type":"session_ended","reason":"the client is not reading the agent's audio"/,
      );
      expect((await sessionRecord(other.agentId, other.sessionId)).status).toBe('open');
      client.close();
      expect((await client.closed).code).toBe(1000);
    } catch (err) {
      // a failed run leaves no socket open to hold the stack's close
      stalled.ws.terminate();
      if (other?.client.socket.readyState === WebSocket.OPEN) other.client.close();
      throw err;
    } finally {
      clearInterval(mic);
    }
    // read again, the client gets what was buffered for it, then the close and why
    stalled.ws.resume();
    expect(await stalled.closed).toEqual({
      code: 4408,
      reason: "the client is not reading the agent's audio",
    });
  }, 150_000); // past the stalled greeting's play-out (the bound above), which the kernel's buffers size

  it('a second client on a session that has one', async () => {
    const { audioPath } = await startedSession();
    const first = rawSocket(audioPath);
    await first.ready;
    const second = rawSocket(audioPath);
    expect((await second.closed).code).toBe(4409);
    // refused: it was sent nothing of the session (its events wait for a ready it never gets)
    expect(second.first()).toBeUndefined();
    expect(first.ws.readyState).toBe(WebSocket.OPEN);
    first.ws.close();
  });

  it('a session that does not exist', async () => {
    const { agentId } = await startedSession();
    const c = rawSocket(`/api/agents/${agentId}/voice-sessions/no-such-session/audio`);
    expect((await c.closed).code).toBe(4404);
  });

  it("a session under another agent's id: 4404, and the session is still its own client's", async () => {
    const { agentId, sessionId, audioPath } = await startedSession();
    const other = (await http.post('/api/agents', { name: 'Other', flow: voiceFlow() })).body.id as string;
    for (const wrong of [other, 'no-such-agent']) {
      const c = rawSocket(`/api/agents/${wrong}/voice-sessions/${sessionId}/audio`);
      expect(await c.closed).toEqual({ code: 4404, reason: 'no voice session with this id is running' });
      expect(c.first()).toBeUndefined();
    }
    expect((await sessionRecord(agentId, sessionId)).status).toBe('open');
    const own = rawSocket(audioPath);
    await own.ready;
    own.ws.close();
  });

  it('ids that are not ids: 400 before anything (never a subject, never "instance gone")', async () => {
    const { agentId, sessionId } = await startedSession();
    for (const path of [
      `/api/agents/x/voice-sessions/a%20b/audio`,
      `/api/agents/${agentId}/voice-sessions/%3E/audio`,
      `/api/agents/${agentId}/voice-sessions/*/audio`,
      `/api/agents/a.b/voice-sessions/${sessionId}/audio`,
    ]) {
      const c = rawSocket(path);
      expect(await c.refused, path).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    }
    expect((await sessionRecord(agentId, sessionId)).status).toBe('open');
  });

  it('control messages beyond their rate: 4429, and the session ends saying why', async () => {
    const { agentId, sessionId, audioPath } = await startedSession();
    const c = rawSocket(audioPath);
    await c.ready;
    // a flood of valid playback reports (audio is paced; these are not): far past 50 at once
    const report = JSON.stringify({ type: 'playback_finished', playedMs: 0, interrupted: false });
    for (let i = 0; i < 5000 && c.ws.readyState === WebSocket.OPEN; i++) c.ws.send(report);
    expect(await c.closed).toEqual({
      code: 4429,
      reason: 'more than 10 JSON messages a second (50 at once)',
    });
    await vi.waitFor(async () => expect((await sessionRecord(agentId, sessionId)).status).toBe('closed'), {
      timeout: 5000,
    });
    const events = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/events`);
    expect(String(events.body)).toContain('"reason":"more than 10 JSON messages a second (50 at once)"');
  });

  it("the first message is ready; the events from the session's first come after it", async () => {
    const { audioPath } = await startedSession();
    const c = rawSocket(audioPath);
    await c.ready;
    await vi.waitFor(() => expect(c.events()).toContain('session_started'), { timeout: 5000 });
    expect(c.first()).toMatchObject({ type: 'ready' });
    c.ws.close();
  });

  it('playback reports without audio keep no session open: the idle cutoff counts audio only', async () => {
    const { agentId, sessionId, audioPath } = await startedSession();
    const c = rawSocket(audioPath);
    await c.ready;
    // a report every half second, well within the control bound, and not a frame of audio
    const report = JSON.stringify({ type: 'playback_finished', playedMs: 0, interrupted: false });
    const reports = setInterval(() => {
      if (c.ws.readyState === WebSocket.OPEN) c.ws.send(report);
    }, 500);
    try {
      // VOICE_INPUT_IDLE_MS (2.5 s here), checked every second
      await vi.waitFor(async () => expect((await sessionRecord(agentId, sessionId)).status).toBe('closed'), {
        timeout: 8000,
        interval: 250,
      });
    } finally {
      clearInterval(reports);
    }
    expect(await c.closed).toEqual({ code: 1000, reason: 'session ended' });
  });

  it('a client that vanishes or stops sending: the session ends within its bound', async () => {
    const gone = await startedSession();
    const a = rawSocket(gone.audioPath);
    await a.ready;
    a.ws.terminate();
    await vi.waitFor(
      async () => expect((await sessionRecord(gone.agentId, gone.sessionId)).status).toBe('closed'),
      { timeout: 5000 },
    );

    const silent = await startedSession();
    // connected late, within the connect bound but past the idle one: its silence counts from its attach
    await new Promise((r) => setTimeout(r, 2600));
    const connectedAt = Date.now();
    const b = rawSocket(silent.audioPath);
    // a session already ended (4404) or an upgrade refused says so, instead of waiting out the test's timeout
    const first = await Promise.race([
      b.ready.then(() => 'ready' as const),
      b.refused.then((refused) => ({ refused })),
      b.closed.then((closedBeforeReady) => ({ closedBeforeReady })),
    ]);
    expect(first).toBe('ready');
    // connected, sending nothing: ended after VOICE_INPUT_IDLE_MS counted from its attach (from the session's
    // start it would have ended at once); the attach is before `ready`, which a loaded machine delays
    expect(await b.closed).toEqual({ code: 1000, reason: 'session ended' });
    expect(Date.now() - connectedAt).toBeGreaterThan(2000);
    expect(await sessionRecord(silent.agentId, silent.sessionId)).toMatchObject({
      status: 'closed',
      sessionType: 'voice',
    });
  }, 60_000);

  it('a client that never connects: the session ends after its connect bound', async () => {
    const { agentId, sessionId } = await startedSession();
    // open within the bound (VOICE_CONNECT_TIMEOUT_MS, 8 s here), closed after it, saying why
    await new Promise((r) => setTimeout(r, 4000));
    expect((await sessionRecord(agentId, sessionId)).status).toBe('open');
    await vi.waitFor(async () => expect((await sessionRecord(agentId, sessionId)).status).toBe('closed'), {
      timeout: 20_000,
      interval: 250,
    });
    const events = await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}/events`);
    expect(String(events.body)).toContain('"reason":"client never connected"');
  }, 40_000);
});

describe('the audio socket is authenticated like the event stream', () => {
  it('with API tokens on: a bearer token or a single-use ticket opens it, nothing else does', async () => {
    const TOKEN = 'voice-test-token-0123456789';
    const s = await startStack({ security: { apiTokens: [TOKEN] } });
    try {
      const h = api(s.baseUrl);
      const auth = { authorization: `Bearer ${TOKEN}` };
      const agentId = (await h.post('/api/agents', { name: 'Locked', flow: voiceFlow() }, auth)).body
        .id as string;
      const start = async () => {
        const res = await h.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys: { openai: KEY } }, auth);
        expect(res.status).toBe(201);
        return res.body as { audioPath: string };
      };
      const ws = (path: string, headers?: Record<string, string>) =>
        new VoiceClient({ url: s.baseUrl.replace(/^http/, 'ws') + path, ...(headers ? { headers } : {}) });

      const first = await start();
      await expect(ws(first.audioPath).ready).rejects.toThrow(/401/);
      const bearer = ws(first.audioPath, auth);
      await bearer.ready;
      bearer.close();

      const second = await start();
      const ticket = await h.post('/api/tickets', { path: second.audioPath }, auth);
      expect(ticket.status).toBe(201);
      const url = `${second.audioPath}?ticket=${encodeURIComponent(String(ticket.body.ticket))}`;
      const browser = ws(url);
      await browser.ready;
      browser.close();
      await browser.closed;
      // single-use: the same ticket again is refused
      await expect(ws(url).ready).rejects.toThrow(/401/);
    } finally {
      await s.close();
    }
  }, 60_000);
});
