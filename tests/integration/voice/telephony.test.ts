import { connectNats } from '@vab/bus';
import { parseAllowList } from '@vab/egress';
import { createLogger } from '@vab/service-kit';
import { startTelephonyService, REFUSALS, type TelephonyService } from '@vab/telephony';
import {
  lineSink,
  postTwilioWebhook,
  speak,
  startSpeechStub,
  startTwilioRestStub,
  streamOf,
  TwilioCaller,
  edge,
  voiceFlow as clinicVoiceFlow,
  withoutEdge,
} from '@vab/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Call, CallSummary, Flow } from '@vab/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  offersTool,
  startOpenAiStub,
  textOf,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * A phone call through Twilio, with a stub Twilio speaking its protocols exactly: the signed voice webhook,
 * then a Media Stream with espeak-ng speech as μ-law 20 ms frames paced in real time, the agent's audio played
 * on the stub's own clock and its marks answered as they are reached. LiveKit's pipeline runs for real in the
 * playground; the models are stubs on loopback.
 */

const AUTH_TOKEN = 'twilio-auth-token-for-tests-0123';
const ACCOUNT_SID = `AC${'0123456789abcdef'.repeat(2)}`;
const FRONT_DESK = '+14155550199';
const SPOKEN = 'I would like to book an appointment please';
const REPLY = 'Of course, I can book that for you. Which day suits you?';
const LONG_REPLY =
  'Of course, I can help. We have appointments on Monday, Tuesday and Wednesday mornings. On Thursday ' +
  'afternoon our doctors can see you for a check up, a vaccination or a longer consultation.';
const LONG_ASK = 'What appointments do you have this week';
const BARGE_IN = 'Stop. What time is it?';
const IVR_GREETING = 'Welcome. Press 1 for reservations.';

let stack: Stack;
let http: ReturnType<typeof api>;
let chat: Awaited<ReturnType<typeof startOpenAiStub>>;
let speech: Awaited<ReturnType<typeof startSpeechStub>>;
let telephony: TelephonyService;
let rest: Awaited<ReturnType<typeof startTwilioRestStub>>;
/** The stream of each Twilio call, so a call update ends it as Twilio does. */
const streams = new Map<string, TwilioCaller>();
let nc: NatsConnection;
let utterances: string[] = [];
let utterancesFrom = 0;
function willSay(...texts: string[]) {
  utterances = texts;
  utterancesFrom = speech.requests.transcriptions.length;
}
const lastUser = (req: ChatRequest) => textOf(req.messages.filter((m) => m.role === 'user').at(-1)?.content);

beforeAll(async () => {
  chat = await startOpenAiStub((req) =>
    offersTool(req, 'decide')
      ? // the IVR's branch: the caller pressed 1, or not
        {
          toolCalls: [
            {
              name: 'decide',
              args: { choice: lastUser(req).includes('DTMF: 1') ? 'reservations' : 'none yet' },
            },
          ],
        }
      : lastUser(req) === LONG_ASK
        ? { content: LONG_REPLY }
        : lastUser(req).includes('appointment')
          ? { content: REPLY }
          : { content: `ok: ${lastUser(req)}` },
  );
  speech = await startSpeechStub({ transcribe: (i) => utterances[i - utterancesFrom] ?? '' });
  stack = await startStack({ playground: { VOICE_INPUT_IDLE_MS: 2500, VOICE_CONNECT_TIMEOUT_MS: 5000 } });
  http = api(stack.baseUrl);
  const log = createLogger('telephony', 'debug', lineSink(stack.logs));
  nc = await connectNats({ url: stack.natsUrl, name: 'telephony', service: 'telephony' }, log);
  // a call update ends the call's Media Stream (Twilio sends stop and closes), then dials
  rest = await startTwilioRestStub({
    accountSid: ACCOUNT_SID,
    authToken: AUTH_TOKEN,
    onCallUpdate: (callSid) => streams.get(callSid)?.hangUp(),
  });
  telephony = await startTelephonyService({
    nc,
    redis: stack.redis,
    log,
    settings: {
      authToken: AUTH_TOKEN,
      publicUrl: undefined,
      callTokenTtlMs: 30_000,
      // the stub REST API is on loopback: the egress policy lets it through by name only
      twilio: { accountSid: ACCOUNT_SID, apiBaseUrl: rest.url, egressAllow: parseAllowList('127.0.0.1') },
      host: '127.0.0.1',
      port: 0,
    },
  });
  await telephony.ready;
});
afterAll(async () => {
  if (process.env.VOICE_DEBUG) console.log(stack.logs.filter((l) => /"level":(40|50)/.test(l)).join('\n'));
  await telephony?.stop(2000);
  await nc?.drain();
  await stack?.close();
  await chat?.close();
  await speech?.close();
  await rest?.close();
});

let numberSeq = 0;
/** An agent with the clinic's voice flow (or `flow`), live (its deploy's `settings`), answering a new number. */
async function liveAgentWithNumber(
  live = true,
  opts: { flow?: Flow; settings?: Record<string, unknown> } = {},
) {
  const flow = opts.flow ?? clinicVoiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
  const agent = await http.post('/api/agents', { name: 'Phone clinic', flow });
  expect(agent.status).toBe(201);
  const agentId = agent.body.id as string;
  if (live) {
    const deploy = await http.post(`/api/agents/${agentId}/deploys`, opts.settings ?? {});
    expect(deploy.status, JSON.stringify(deploy.body)).toBe(201);
    // the deploy pipeline checks the version and takes it live
    await vi.waitFor(
      async () => {
        const d = (await http.get(`/api/agents/${agentId}/deploys`)).body as { id: string; status: string }[];
        const mine = d.find((x) => x.id === deploy.body.id);
        expect(mine?.status, JSON.stringify(mine)).toBe('live');
      },
      { timeout: 30_000 },
    );
  }
  const number = `+1415555${String(1000 + ++numberSeq)}`;
  const created = await http.post('/api/phone-numbers', { number, provider: 'twilio', agentId });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return { agentId, number, phoneNumberId: created.body.id as string };
}

const voiceUrl = () => `${telephony.url}/telephony/twilio/voice`;
let callSeq = 0;
const callParams = (to: string) => ({
  CallSid: `CA${String(++callSeq).padStart(32, '0')}`,
  AccountSid: 'AC00000000000000000000000000000000',
  From: '+14155550123',
  To: to,
  CallStatus: 'ringing',
  Direction: 'inbound',
});

/** Rings the number as Twilio does and follows the TwiML's Stream. */
async function ring(to: string) {
  const params = callParams(to);
  const answer = await postTwilioWebhook(voiceUrl(), AUTH_TOKEN, params);
  expect(answer.status).toBe(200);
  const stream = streamOf(answer.body);
  expect(stream, answer.body).toBeDefined();
  return { params, stream: stream!, twiml: answer.body };
}
type Rung = Awaited<ReturnType<typeof ring>>;

/** Twilio's side of a rung call's Media Stream: the TwiML's parameters (its call token), signed, unless told. */
const streamCaller = (
  { params, stream }: Rung,
  opts: { parameters?: Record<string, string>; signature?: null } = {},
) =>
  new TwilioCaller({
    url: stream.url,
    authToken: AUTH_TOKEN,
    callSid: params.CallSid,
    parameters: opts.parameters ?? stream.parameters,
    signature: opts.signature,
  });

/** Until the caller has heard `n` of the agent's audio segments (its greeting is the first). */
const heardSegments = (caller: TwilioCaller, n: number, timeout = 20_000) =>
  vi.waitFor(() => expect(caller.segments.length).toBeGreaterThanOrEqual(n), { timeout });

/** Rings `to`, opens the Media Stream its TwiML names and waits for the greeting. */
async function pickUp(to: string) {
  const rung = await ring(to);
  const caller = streamCaller(rung);
  await caller.opened;
  await heardSegments(caller, 1);
  return { ...rung, caller };
}

/** A greeting, then at the caller's first turn the call is handed to the front desk's number. */
function transferFlow(): Flow {
  const base = clinicVoiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
  return {
    nodes: [
      ...base.nodes.filter((n) => n.id !== 'talk' && n.id !== 'end'),
      { id: 'desk', nodeType: 'transfer', targetNumber: FRONT_DESK },
    ],
    edges: [
      ...base.edges.filter((e) => e.source !== 'start' && e.source !== 'talk'),
      edge('start', 'output', 'desk'),
    ],
  };
}

/** The agent's phone calls, newest first. */
async function phoneCalls(agentId: string): Promise<CallSummary[]> {
  const listed = await http.get(`/api/agents/${agentId}/calls?channel=phone`);
  expect(listed.status).toBe(200);
  return (listed.body as { calls: CallSummary[] }).calls;
}

/** The agent's one phone call, once it has ended, with its transcript. */
async function endedCall(agentId: string): Promise<Call> {
  let call: Call | undefined;
  await vi.waitFor(
    async () => {
      const [summary] = await phoneCalls(agentId);
      expect(summary?.status).toBe('ended');
      call = (await http.get(`/api/agents/${agentId}/calls/${summary!.id}`)).body as Call;
    },
    { timeout: 15_000 },
  );
  return call!;
}

describe('phone numbers', () => {
  it('connects an E.164 number to one agent at a time, moves and disconnects it', async () => {
    const a = (await http.post('/api/agents', { name: 'A' })).body.id as string;
    const b = (await http.post('/api/agents', { name: 'B' })).body.id as string;
    const bad = await http.post('/api/phone-numbers', { number: '555-0100', provider: 'twilio', agentId: a });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('VALIDATION_FAILED');
    const unknownField = await http.post('/api/phone-numbers', {
      number: '+14155550100',
      provider: 'twilio',
      agentId: a,
      label: 'x',
    });
    expect(unknownField.status).toBe(400);
    const noAgent = await http.post('/api/phone-numbers', {
      number: '+14155550100',
      provider: 'twilio',
      agentId: 'no-such-agent',
    });
    expect(noAgent.status).toBe(404);

    const created = await http.post('/api/phone-numbers', {
      number: '+14155550100',
      provider: 'twilio',
      agentId: a,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ number: '+14155550100', provider: 'twilio', agentId: a });
    const held = await http.post('/api/phone-numbers', {
      number: '+14155550100',
      provider: 'twilio',
      agentId: b,
    });
    expect(held.status).toBe(409);
    expect(held.body.code).toBe('CONFLICT');

    const moved = await http.patch(`/api/phone-numbers/${created.body.id}`, { agentId: b });
    expect(moved.status).toBe(200);
    expect(moved.body.agentId).toBe(b);
    const listed = await http.get('/api/phone-numbers');
    expect(listed.body).toContainEqual(expect.objectContaining({ id: created.body.id, agentId: b }));

    expect((await http.delete(`/api/phone-numbers/${created.body.id}`)).status).toBe(200);
    expect((await http.delete(`/api/phone-numbers/${created.body.id}`)).status).toBe(404);
    expect((await http.patch(`/api/phone-numbers/${created.body.id}`, { agentId: a })).status).toBe(404);
    // the number is free again
    const again = await http.post('/api/phone-numbers', {
      number: '+14155550100',
      provider: 'twilio',
      agentId: b,
    });
    expect(again.status).toBe(201);
    await http.delete(`/api/phone-numbers/${again.body.id}`);
  });
});

describe('the voice webhook', () => {
  it('refuses a missing or wrong signature with 403, starting nothing', async () => {
    const { number } = await liveAgentWithNumber();
    const params = callParams(number);
    expect((await postTwilioWebhook(voiceUrl(), undefined, params)).status).toBe(403);
    expect((await postTwilioWebhook(voiceUrl(), 'another-token', params)).status).toBe(403);
    // signed over another URL than the one called
    expect((await postTwilioWebhook(voiceUrl(), AUTH_TOKEN, params, `${voiceUrl()}?x=1`)).status).toBe(403);
  });

  it('answers an unknown number and an agent with no live deploy with a few words and a hang-up', async () => {
    const unknown = await postTwilioWebhook(voiceUrl(), AUTH_TOKEN, callParams('+14155559999'));
    expect(unknown.status).toBe(200);
    expect(unknown.body).toContain(`<Say>${REFUSALS.unknownNumber}</Say><Hangup/>`);
    const { number } = await liveAgentWithNumber(false);
    const notLive = await postTwilioWebhook(voiceUrl(), AUTH_TOKEN, callParams(number));
    expect(notLive.status).toBe(200);
    expect(notLive.body).toContain(`<Say>${REFUSALS.notLive}</Say><Hangup/>`);
  });

  it('answers a full deploy with "busy" and a hang-up, the refusal recorded as a busy phone call', async () => {
    const { agentId, number } = await liveAgentWithNumber(true, { settings: { maxConcurrentCalls: 1 } });
    const first = await ring(number);
    const busy = await postTwilioWebhook(voiceUrl(), AUTH_TOKEN, callParams(number));
    expect(busy.status).toBe(200);
    expect(busy.body).toContain(`<Say>${REFUSALS.busy}</Say><Hangup/>`);
    const calls = await phoneCalls(agentId);
    expect(calls.map((c) => [c.status, c.endedReason, c.endedDetail?.kind ?? null])).toEqual([
      ['ended', 'busy', 'max_concurrent_calls'],
      ['active', null, null],
    ]);
    expect(calls[0]!.caller).toEqual({ from: '…0123', to: number });

    // Twilio reports the first call over before its stream ever connected: it ends now, never connected
    const status = await postTwilioWebhook(`${telephony.url}/telephony/twilio/status`, AUTH_TOKEN, {
      ...first.params,
      CallStatus: 'completed',
      CallDuration: '1',
    });
    expect(status.status).toBe(200);
    await vi.waitFor(
      async () => expect((await phoneCalls(agentId))[1]).toMatchObject({ endedReason: 'no_connect' }),
      { timeout: 10_000 },
    );
    // a status unsigned is refused like a voice webhook
    const forged = await postTwilioWebhook(`${telephony.url}/telephony/twilio/status`, 'wrong', first.params);
    expect(forged.status).toBe(403);
  });
});

describe('a phone call over the Media Stream', () => {
  it('greets as μ-law with marks, answers a spoken turn, and ends when the caller hangs up', async () => {
    willSay(SPOKEN);
    const said = speak(SPOKEN, { sampleRate: 8000 });
    const { agentId, number } = await liveAgentWithNumber();
    // the greeting plays and its mark is answered
    const { stream, caller } = await pickUp(number);
    expect(stream.url).toBe(`${telephony.url.replace(/^http/, 'ws')}/telephony/twilio/media`);
    expect(caller.segments[0]!.audibleAt).toBeDefined();
    expect(caller.received.some((m) => m.event === 'mark')).toBe(true);
    caller.say(said);
    await heardSegments(caller, 2, 25_000);
    caller.hangUp();
    await caller.closed;

    // a phone call is a call: listed with its channel, the number called, the caller's last 4 digits
    const call = await endedCall(agentId);
    expect(call).toMatchObject({
      channel: 'phone',
      caller: { from: '…0123', to: number },
      endedReason: 'caller_hung_up',
      version: 1,
    });
    expect(call.messages.map((x) => x.role)).toEqual(['assistant', 'user', 'assistant']);
    expect(call.messages[1]!.content).toBe(SPOKEN);
    expect(call.messages[2]!.content).toBe(REPLY);
    // no voice test session was made of it
    expect((await http.get(`/api/agents/${agentId}/test-sessions`)).body).toEqual([]);
  }, 90_000);

  it('takes a pressed key as a turn that names it: "press 1 for reservations" routes on the digit', async () => {
    // greeting → a menu (a branch cannot follow start) → reservations when the caller chose them
    const base = clinicVoiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL });
    const flow: Flow = {
      nodes: [
        ...base.nodes.map((n) => (n.id === 'start' ? { ...n, command: IVR_GREETING } : n)),
        { id: 'menu', nodeType: 'opentalk', command: 'Offer reservations (press 1).' },
        {
          id: 'route',
          nodeType: 'categorize',
          command: 'Which option did the caller choose?',
          categories: ['reservations', 'other'],
        },
        { id: 'reservations', nodeType: 'opentalk', command: 'Take the reservation.' },
      ],
      edges: [
        ...withoutEdge(base, 'start', 'output').edges,
        edge('start', 'output', 'menu'),
        edge('menu', 'output', 'route'),
        edge('route', 'cat_0', 'reservations'),
        edge('route', 'cat_1', 'talk'),
        edge('reservations', 'output', 'end'),
      ],
    };
    willSay();
    const { agentId, number } = await liveAgentWithNumber(true, { flow });
    // the call's events as its owner publishes them
    const events: { type: string; digit?: string; stepId?: string }[] = [];
    const sub = nc.subscribe(`events.${agentId}.>`, {
      callback: (_e, msg) => void events.push(JSON.parse(new TextDecoder().decode(msg.data))),
    });
    const { caller } = await pickUp(number);
    // each key is a turn the agent answers: 0 moves past the greeting, 9 chooses nothing, 1 chooses reservations
    for (const [i, digit] of ['0', '9', '1'].entries()) {
      caller.dtmf(digit);
      await heardSegments(caller, i + 2);
    }
    caller.hangUp();
    await caller.closed;

    const m = (await endedCall(agentId)).messages;
    expect(m.map((x) => [x.role, x.content, x.stepId])).toEqual([
      ['assistant', IVR_GREETING, 'start'],
      ['user', 'DTMF: 0', 'start'],
      ['assistant', 'ok: DTMF: 0', 'menu'],
      ['user', 'DTMF: 9', 'menu'],
      ['assistant', 'ok: DTMF: 9', 'menu'],
      ['user', 'DTMF: 1', 'menu'],
      // the branch took the digit's exit: the reply is the reservations step's
      ['assistant', 'ok: DTMF: 1', 'reservations'],
    ]);
    expect(events.filter((e) => e.type === 'dtmf')).toEqual([
      expect.objectContaining({ digit: '0', stepId: 'start' }),
      expect.objectContaining({ digit: '9', stepId: 'menu' }),
      expect.objectContaining({ digit: '1', stepId: 'menu' }),
    ]);
    sub.unsubscribe();
  }, 90_000);

  it("hands the call to a person at the number a transfer step names, through Twilio's REST API", async () => {
    const { agentId, number } = await liveAgentWithNumber(true, { flow: transferFlow() });
    const { params, caller } = await pickUp(number);
    streams.set(params.CallSid, caller);
    const asked = rest.requests.length;
    // any turn moves past the greeting to the transfer
    caller.dtmf('0');
    await caller.closed;

    const update = rest.requests.slice(asked);
    expect(update).toEqual([
      {
        method: 'POST',
        path: `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${params.CallSid}.json`,
        auth: { user: ACCOUNT_SID, password: AUTH_TOKEN },
        form: {
          Twiml: `<?xml version="1.0" encoding="UTF-8"?><Response><Dial>${FRONT_DESK}</Dial></Response>`,
        },
      },
    ]);
    const call = await endedCall(agentId);
    expect(call).toMatchObject({ endedReason: 'transferred', transferredTo: FRONT_DESK, channel: 'phone' });
  }, 60_000);

  it('says sorry and ends the call when Twilio refuses the hand-over', async () => {
    const { agentId, number } = await liveAgentWithNumber(true, { flow: transferFlow() });
    const { caller } = await pickUp(number);
    rest.failWith(500);
    try {
      caller.dtmf('0');
      // the agent's apology plays, then the session ends and the stream with it
      await heardSegments(caller, 2);
      expect((await caller.closed).code).toBe(1000);
    } finally {
      rest.failWith(undefined);
    }
    const call = await endedCall(agentId);
    expect(call).toMatchObject({ endedReason: 'agent_ended', transferredTo: null });
  }, 60_000);

  it('sends clear at once on a barge-in, and stores the reply cut where the line stopped playing it', async () => {
    willSay(LONG_ASK, BARGE_IN);
    const ask = speak(LONG_ASK, { sampleRate: 8000, voice: 'festival' });
    const { agentId, number } = await liveAgentWithNumber();
    const { caller } = await pickUp(number);
    caller.say(ask);
    // the long answer starts playing; the caller talks over it 1.5 s in (the wait is the barge-in's timing)
    await vi.waitFor(() => expect(caller.playing).toBe(true), { timeout: 25_000 });
    await new Promise((r) => setTimeout(r, 1500));
    caller.say(speak(BARGE_IN, 8000));
    await vi.waitFor(() => expect(caller.received.some((m) => m.event === 'clear')).toBe(true), {
      timeout: 15_000,
    });
    expect(caller.segments.some((s) => s.cleared)).toBe(true);
    await vi.waitFor(
      () => expect(caller.segments.filter((s) => !s.cleared).length).toBeGreaterThanOrEqual(2),
      {
        timeout: 25_000,
      },
    );
    caller.hangUp();
    await caller.closed;

    const m = (await endedCall(agentId)).messages;
    expect(m.map((x) => x.role)).toEqual(['assistant', 'user', 'assistant', 'user', 'assistant']);
    // cut where playback stopped: a start of the long reply, not all of it
    expect(m[2]!.content.length).toBeLessThan(LONG_REPLY.length * 0.7);
    expect(LONG_REPLY.startsWith(m[2]!.content)).toBe(true);
    expect(m[3]!.content).toBe(BARGE_IN);
    expect(m[4]!.content).toBe(`ok: ${BARGE_IN}`);
  }, 120_000);

  it('closes a stream whose call token is forged or used, and an upgrade without a signature', async () => {
    const { number } = await liveAgentWithNumber();
    const rung = await ring(number);
    const forged = streamCaller(rung, {
      parameters: { token: rung.stream.parameters.token!.slice(0, -4) + 'AAAA' },
    });
    expect((await forged.closed).code).toBe(4401);
    const unsigned = streamCaller(rung, { signature: null });
    await expect(unsigned.opened).rejects.toThrow('refused: 403');
    const first = streamCaller(rung);
    await first.opened;
    const second = streamCaller(rung);
    expect((await second.closed).code).toBe(4401);
    first.hangUp();
    await first.closed;
  });

  it('closes a stream that sends audio faster than real time, or garbage, with a reason the call keeps', async () => {
    const { agentId, number } = await liveAgentWithNumber();
    const fast = streamCaller(await ring(number));
    await fast.opened;
    await vi.waitFor(() => expect(fast.received.length).toBeGreaterThan(0), { timeout: 20_000 });
    fast.burst(3000);
    const closed = await fast.closed;
    expect(closed.code).toBe(4429);
    expect(closed.reason).toContain('faster than real time');
    // the builder reads why on the call: the caller's side went, closed for its pace
    expect(await endedCall(agentId)).toMatchObject({
      endedReason: 'caller_hung_up',
      endedDetail: { kind: 'media_too_fast' },
    });

    const garbage = streamCaller(await ring(number));
    await garbage.opened;
    // attached (the greeting plays): the call is under way when the garbage comes
    await vi.waitFor(() => expect(garbage.received.length).toBeGreaterThan(0), { timeout: 20_000 });
    garbage.sendRaw('{"event":"nonsense"}');
    const closedB = await garbage.closed;
    expect(closedB.code).toBe(4400);
    await vi.waitFor(
      async () =>
        expect((await phoneCalls(agentId))[0]).toMatchObject({
          status: 'ended',
          endedReason: 'caller_hung_up',
          endedDetail: { kind: 'bad_message' },
        }),
      { timeout: 15_000 },
    );
  });
});
