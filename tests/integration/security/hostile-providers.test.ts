import type { Flow } from '@vab/contracts';
import {
  lastUserText,
  speak,
  startOpenAiStub,
  startSpeechStub,
  VoiceClient,
  voiceFlow,
  type ChatReply,
  type ChatRequest,
} from '@vab/testkit';
import type { OpenAiStub, SpeechStub } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { requireBuilt, spawnService, type ServiceProcess } from '../../helpers/processes.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * A flow's providers as a hostile flow author points them: answering more than any client should read, a
 * model reply of one endless word, a provider that echoes the key it was sent. The playground is a process of
 * its own here (its built entry point, as an operator runs it), beside an in-process gateway, agents and
 * sessions: what is asserted is what a caller and an operator see — the process still up, its other sessions
 * answered, the failure reported as an event, and its log (every line it writes) without a credential.
 */

const CALLER_KEY = 'CALLERKEY-7f3a9c1e5b';
const SERVER_KEY = 'SERVERKEY-e2d4f6a8c0';
const BOUND = 4 * 1024 * 1024;
const WORD = 1_000_000;

let stack: Stack;
let http: ReturnType<typeof api>;
let playground: ServiceProcess;
/** The normal providers, and the hostile ones. */
let chat: OpenAiStub;
let speech: SpeechStub;
let floodSpeech: SpeechStub;
let floodChat: OpenAiStub;
let wordChat: OpenAiStub;
let echoSpeech: SpeechStub;
/** What the speech stub hears the callers say (it cannot recognize speech). */
let heard = 'I would like to book an appointment';

/** The long-word model: what it answers by what the caller said. */
function wordScript(req: ChatRequest): ChatReply {
  const said = lastUserText(req).toLowerCase();
  // a million-character word streamed in pieces of 1,000 (a thousand events: under the byte bound)
  if (said.includes('word')) return { content: 'a'.repeat(WORD), pieceChars: 1000 };
  // the same word at the byte bound: more than it lets through
  if (said.includes('huge')) return { content: 'a'.repeat(BOUND), pieceChars: 64 * 1024 };
  return { content: `ok: ${lastUserText(req)}` };
}

beforeAll(async () => {
  requireBuilt();
  [chat, speech, floodSpeech, floodChat, wordChat, echoSpeech] = await Promise.all([
    startOpenAiStub((req) => ({ content: `ok: ${lastUserText(req)}` })),
    startSpeechStub({ transcribe: () => heard }),
    startSpeechStub({
      transcribe: () => '',
      flood: { speech: BOUND + 1024 * 1024, transcriptions: BOUND + 1024 * 1024 },
    }),
    startOpenAiStub(() => ({ floodBytes: BOUND + 1024 * 1024 })),
    startOpenAiStub(wordScript),
    // a provider that tells whoever asks which key it was given
    startSpeechStub({
      transcribe: () => '',
      fail: (_route, authorization) => ({ status: 401, message: `invalid key ${authorization ?? ''}` }),
    }),
  ]);
  stack = await startStack();
  http = api(stack.baseUrl);
  // the stack's in-process playground makes way for a process of its own
  await stack.services.playground.stop();
  playground = spawnService('playground', {
    NATS_URL: stack.natsUrl,
    INSTANCE_ID: 'pg-hostile',
    LOG_LEVEL: 'info',
    ENV_FILE: '/nonexistent/.env',
    FLOW_EGRESS_ALLOW: '127.0.0.1',
    // the operator's key, sent only to a URL the operator trusts: here, the echoing one
    OPENAI_API_KEY: SERVER_KEY,
    TRUSTED_MODEL_URLS: echoSpeech.baseURL,
    RECORDINGS: 'off',
    VOICE_INPUT_IDLE_MS: '4000',
  });
  await playground.waitFor('playground instance up', 30_000);
}, 60_000);
afterAll(async () => {
  playground?.child.kill('SIGKILL');
  await playground?.exited;
  await stack?.close();
  await Promise.all([chat, speech, floodSpeech, floodChat, wordChat, echoSpeech].map((s) => s?.close()));
});

/** The clinic's voice flow with some nodes pointed elsewhere (`{ tts: { baseURL } }`). */
function flowWith(patch: Record<string, Record<string, unknown>>): Flow {
  const flow = voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
  flow.nodes = flow.nodes.map((n) => (patch[n.id] ? { ...n, ...patch[n.id] } : n));
  return flow;
}

async function agentOf(flow: Flow): Promise<string> {
  const res = await http.post('/api/agents', { name: 'Hostile providers', flow });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** A voice session of `agentId`, its socket ready. */
async function voiceSession(agentId: string, apiKeys: Record<string, string> = { openai: CALLER_KEY }) {
  const started = await http.post(`/api/agents/${agentId}/voice-sessions`, { apiKeys });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  const client = new VoiceClient({
    url: stack.baseUrl.replace(/^http/, 'ws') + String(started.body.audioPath),
  });
  await client.ready;
  return client;
}

const errorsOf = (client: VoiceClient) => client.events.filter((e) => e.type === 'error');

/** Another caller on the same instance, now: a voice session that greets, and a text turn that answers. */
async function anotherCallerIsServed(): Promise<void> {
  const client = await voiceSession(await agentOf(flowWith({})));
  await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
  client.close();
  await client.closed;
}

describe('a flow’s providers, hostile, against a playground process', () => {
  it('a TTS, an STT and an LLM answering more than the byte bound: each reported, the process up, other callers served', async () => {
    const over =
      /^the (tts|stt|llm) model failed: (the answer|one event of the streamed answer) was over the server's \d+-byte bound$/;
    const [ttsClient, sttClient, llmClient] = await Promise.all([
      agentOf(flowWith({ tts: { baseURL: floodSpeech.baseURL } })).then((id) => voiceSession(id)),
      agentOf(flowWith({ stt: { baseURL: floodSpeech.baseURL } })).then((id) => voiceSession(id)),
      agentOf(flowWith({ llm: { baseURL: floodChat.baseURL } })).then((id) => voiceSession(id)),
    ]);
    // the greeting asks the TTS; the caller's words ask the STT, then the model
    sttClient.say(speak('I would like to book an appointment'));
    llmClient.say(speak('I would like to book an appointment'));
    for (const [client, node] of [
      [ttsClient, 'tts'],
      [sttClient, 'stt'],
      [llmClient, 'llm'],
    ] as const) {
      await vi.waitFor(
        () => {
          // a process that exits takes every session on it along
          expect(playground.child.exitCode, playground.output().slice(-3000)).toBe(null);
          expect(errorsOf(client)).toContainEqual(
            expect.objectContaining({ code: `${node.toUpperCase()}_ERROR`, nodeId: node, kind: 'failed' }),
          );
        },
        { timeout: 30_000 },
      );
      for (const e of errorsOf(client).filter((x) => x.nodeId === node)) expect(e.message).toMatch(over);
    }
    expect(playground.child.exitCode).toBe(null);
    // the sessions are still on (their socket open), and another caller is served meanwhile
    expect([ttsClient, sttClient, llmClient].map((c) => c.socket.readyState)).toEqual([1, 1, 1]);
    await anotherCallerIsServed();
    for (const c of [ttsClient, sttClient, llmClient]) c.close();
    await Promise.all([ttsClient, sttClient, llmClient].map((c) => c.closed));
    expect(playground.child.exitCode).toBe(null);
  }, 120_000);

  it('a model reply of one endless word, spoken and typed: cut before speech, the instance answering meanwhile', async () => {
    const agentId = await agentOf(flowWith({ llm: { baseURL: wordChat.baseURL } }));
    const before = speech.requests.speech.length;
    const client = await voiceSession(agentId);
    await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
    // the caller asks; the model answers a million-character word
    heard = 'Say one long word please';
    client.say(speak(heard));
    await vi.waitFor(() => expect(wordChat.requests.map(lastUserText)).toContain(heard), { timeout: 20_000 });
    // while it is taken apart for speech, another caller's voice session starts and greets, and a text turn of
    // another session answers (within the gateway's bound: a wedged instance answers 504)
    await anotherCallerIsServed();
    const other = await agentOf(flowWith({}));
    const quick = await http.post(`/api/agents/${other}/text-sessions`, { apiKeys: { openai: CALLER_KEY } });
    expect(quick.status).toBe(201);
    const hello = await http.post(
      `/api/agents/${other}/text-sessions/${quick.body.sessionId as string}/turns`,
      {
        text: 'hello',
      },
    );
    expect(hello.status).toBe(200);
    expect(hello.body.replies).toEqual(['ok: hello']);
    // a voice session's transcript is what was spoken (LiveKit's): the word as cut, and the log says why
    await vi.waitFor(
      () =>
        expect(client.events).toContainEqual(
          expect.objectContaining({ type: 'agent_reply', text: 'a'.repeat(100), stepId: 'talk' }),
        ),
      { timeout: 30_000 },
    );
    const spoken = speech.requests.speech.slice(before).map((s) => s.input);
    expect(spoken).toContain('a'.repeat(100));
    expect(Math.max(...spoken.map((s) => s.length))).toBeLessThanOrEqual(100);
    await playground.waitFor('"code":"SPOKEN_TEXT_CUT"');
    heard = 'I would like to book an appointment';
    client.close();
    await client.closed;
    // typed, the same word is the reply as the model gave it; one at the byte bound is a failed turn
    const text = await http.post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: CALLER_KEY } });
    expect(text.status).toBe(201);
    const turn = (t: string) =>
      http.post(`/api/agents/${agentId}/text-sessions/${text.body.sessionId as string}/turns`, { text: t });
    const typed = await turn('one long word');
    expect(typed.status).toBe(200);
    expect(typed.body.replies).toEqual(['a'.repeat(WORD)]);
    const huge = await turn('a huge one');
    expect(huge.status).toBe(200);
    expect(huge.body.error).toMatchObject({ modality: 'llm', kind: 'failed' });
    expect(huge.body.error.message).toMatch(/over the server's \d+-byte bound/);
    expect(playground.child.exitCode).toBe(null);
  }, 120_000);

  it("an STT echoing the key it was sent: no line of the process's log holds the caller's key or the server's", async () => {
    const agentId = await agentOf(flowWith({ stt: { baseURL: echoSpeech.baseURL } }));
    // the caller's key goes to the flow's URL; with no key of the caller's, the operator's (a trusted URL)
    const withCallerKey = await voiceSession(agentId, { openai: CALLER_KEY });
    const withServerKey = await voiceSession(agentId, {});
    for (const c of [withCallerKey, withServerKey]) c.say(speak('I would like to book an appointment'));
    for (const c of [withCallerKey, withServerKey])
      await vi.waitFor(
        () => expect(errorsOf(c)).toContainEqual(expect.objectContaining({ nodeId: 'stt', kind: 'auth' })),
        { timeout: 30_000 },
      );
    expect(echoSpeech.requests.transcriptions.map((t) => t.authorization)).toEqual(
      expect.arrayContaining([`Bearer ${CALLER_KEY}`, `Bearer ${SERVER_KEY}`]),
    );
    // LiveKit's own line of the failed recognition, written through its logger, is there: redacted
    await playground.waitFor('provider recognize task failed');
    for (const c of [withCallerKey, withServerKey]) c.close();
    await Promise.all([withCallerKey.closed, withServerKey.closed]);
    const log = playground.output();
    expect(log).toContain('invalid key Bearer [redacted]');
    expect(log).not.toContain(CALLER_KEY);
    expect(log).not.toContain(SERVER_KEY);
    for (const c of [withCallerKey, withServerKey])
      expect(JSON.stringify(c.events)).not.toMatch(/CALLERKEY|SERVERKEY/);
  }, 90_000);
});
