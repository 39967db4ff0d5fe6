import type { Flow } from '@vab/contracts';
import {
  decodeRecording,
  levelOf,
  offersTool,
  startSpeechStub,
  systemText,
  textOf,
  type ChatReply,
  type ChatRequest,
  type SpeechStub,
} from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finishedRun } from '../../helpers/runs.js';
import type { api, Stack } from '../../helpers/stack.js';
import { startVoiceStack, type VoiceStack } from '../../helpers/voice.js';

/**
 * Simulated callers by voice, on real audio: the caller's lines spoken by a TTS (the OpenAI speech stub,
 * espeak-ng) and streamed in real time into the flow's voice pipeline (VAD, turn handling, STT, LLM, TTS,
 * interruptions running for real), the agent heard back through an STT; the figures measured from the audio.
 */

const KEY = 'sk-voice-sim-key-0123456789';
const LINE = 'I would like to book an appointment for next Monday morning please';
const SECOND = 'Actually, wait. Is Tuesday possible instead?';
const SHORT = 'Sure, I can help with that.';
const LONG =
  'Of course. We have appointments on Monday, Tuesday and Wednesday mornings, and on Thursday afternoon, ' +
  'and our doctors can see you for a check up, a vaccination or a longer consultation.';
const HEARD = 'the agent answers';

let voice: VoiceStack;
let stack: Stack;
let http: ReturnType<typeof api>;
/** The flows' speech: TTS (espeak-ng), and an STT that hears the caller's line. */
let speech: SpeechStub;
/** A TTS whose first byte comes 3.5 s late: a slow provider. */
let slowSpeech: SpeechStub;
/** The caller's own ear where a case names one. */
let ear: SpeechStub;

const GOODBYE = 'Goodbye, see you on Monday.';

/**
 * The agent: a long answer to the first turn when its instructions say LONG, else a short one; when they say
 * ENDS, it completes its step on the caller's first line (`complete_step`) and says goodbye.
 */
function agent(req: ChatRequest): ChatReply {
  const users = req.messages.filter((m) => m.role === 'user').length;
  if (systemText(req).includes('ENDS')) {
    if (req.messages.at(-1)?.role === 'tool') return { content: GOODBYE };
    if (offersTool(req, 'complete_step') && users >= 1)
      return { toolCalls: [{ name: 'complete_step', args: {} }] };
  }
  return { content: systemText(req).includes('LONG') && users <= 1 ? LONG : SHORT };
}

/** The simulated caller: its lines in order, whatever it heard. */
function caller(req: ChatRequest): ChatReply {
  const own = req.messages.filter((m) => m.role === 'assistant').length;
  return { content: own === 0 ? LINE : SECOND };
}

/** The judge: passes "answers" when the figures beside the transcript say every turn was answered. */
function judge(req: ChatRequest): ChatReply {
  const prompt = textOf(req.messages.at(-1)?.content);
  const measured = prompt.includes("Measured from the call's audio") && !prompt.includes('no answer');
  return {
    toolCalls: [
      {
        name: 'verdict',
        args: { passed: measured, reason: measured ? 'Every turn answered.' : 'No figures.', turn: null },
      },
    ],
  };
}

const script = (req: ChatRequest): ChatReply =>
  offersTool(req, 'end_call') ? caller(req) : offersTool(req, 'verdict') ? judge(req) : agent(req);

beforeAll(async () => {
  slowSpeech = await startSpeechStub({ transcribe: () => LINE, speechDelayMs: 3500 });
  ear = await startSpeechStub({ transcribe: () => HEARD });
  voice = await startVoiceStack({
    chat: script,
    transcribe: () => 'I would like to book an appointment',
    stack: {
      testRuns: { caseTimeoutMs: 120_000, attempts: 1, heartbeatMs: 2000, concurrency: 4 },
      playground: { VOICE_SIM_SETTLE_MS: 800, VOICE_SIM_ANSWER_TIMEOUT_MS: 8000 },
    },
  });
  ({ stack, http, speech } = voice);
});
afterAll(async () => {
  await voice?.close();
  await slowSpeech?.close();
  await ear?.close();
});

/** The clinic's voice flow; `agent` sets turn handling on the agent node, `tts` moves its TTS. */
function flowOf(opts: { agent?: Record<string, unknown>; ttsURL?: string } = {}): Flow {
  const flow = voice.flow(opts.agent);
  if (opts.ttsURL) flow.nodes = flow.nodes.map((n) => (n.id === 'tts' ? { ...n, baseURL: opts.ttsURL } : n));
  return flow;
}

async function newAgent(name: string, flow: Flow): Promise<string> {
  const res = await http.post('/api/agents', { name, flow });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.id as string;
}

async function newCase(agentId: string, body: Record<string, unknown>) {
  const res = await http.post(`/api/agents/${agentId}/test-cases`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string };
}

interface VoiceFigures {
  durationMs: number;
  turns: { callerEndMs: number; responseMs: number | null }[];
  agentInterruptions: { count: number; totalMs: number };
  bargeIns: { atMs: number; stopMs: number | null }[];
  longestSilenceMs: number;
  talkMs: { agent: number; caller: number };
  noiseSnrDb: number | null;
  heard: string[];
}
interface Attempt {
  verdict: string;
  failures: { expectation: string; message: string }[];
  observed: {
    sessionId: string;
    userTurns: string[];
    voice: VoiceFigures | null;
    usage: {
      simulator: { kind: string; provider: string; ttsCharacters?: number; sttAudioSeconds?: number }[];
    };
    judgements: { passed: boolean }[] | null;
  } | null;
  error: string | null;
}
interface Run {
  id: string;
  status: string;
  latency: Record<string, number>;
  cases: { verdict: string; attempts: number; passRate: number | null; repeats: Attempt[] }[];
}

/** A test run of the agent's cases, once it finished; `withinMs` bounds the wait (it fails past it). */
async function run(agentId: string, withinMs = 300_000): Promise<Run> {
  const started = await http.post(`/api/agents/${agentId}/test-runs`, { apiKeys: { openai: KEY } });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  return (await finishedRun(http, agentId, started.body.id, withinMs)) as Run;
}

/** The level of the quietest second of the caller's channel (the left) in an attempt's recording. */
async function quietestCallerSecond(agentId: string, sessionId: string): Promise<number> {
  // the attempt's record names its recording once stored
  await expect
    .poll(
      async () =>
        (
          (await http.get(`/api/agents/${agentId}/test-sessions/${sessionId}`)).body as {
            recording?: unknown;
          }
        ).recording,
      { timeout: 10_000, interval: 100 },
    )
    .toEqual(expect.anything());
  const res = await fetch(`${stack.baseUrl}/api/agents/${agentId}/test-sessions/${sessionId}/recording`);
  expect(res.status).toBe(200);
  const { left, sampleRate, durationMs } = await decodeRecording(new Uint8Array(await res.arrayBuffer()));
  let quietest = Infinity;
  // the call, not the moments around it (the session opening, and closing after the caller hung up)
  for (let at = 500; at + 1000 <= durationMs - 2000; at += 250) {
    quietest = Math.min(quietest, levelOf(left, sampleRate, at, at + 1000));
  }
  return quietest;
}

const simulation = (voice: Record<string, unknown>, maxTurns = 1) => ({
  persona: 'A patient who wants an appointment.',
  goal: 'Book an appointment.',
  maxTurns,
  voice,
});

const goLive = async (agentId: string) => {
  const d = (await http.post(`/api/agents/${agentId}/deploys`, { external: true })).body;
  await http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'building' });
  return http.patch(`/api/agents/${agentId}/deploys/${d.id}`, { status: 'live' });
};

describe('simulated callers by voice', () => {
  it('an eager endpointing interrupts a caller who pauses mid-sentence; a longer minimum delay passes, and the gate follows', async () => {
    // the turn ends on the VAD's silence alone, at once: a 2.5 s pause inside the line ends it
    const eager = { turnDetection: 'vad', minEndpointingDelay: 0 };
    const agentId = await newAgent('Eager clinic', flowOf({ agent: eager }));
    await newCase(agentId, {
      name: 'no interruption of the caller',
      simulation: simulation({ behaviour: { midSentencePause: { ms: 2500 } } }),
      expect: { maxAgentInterruptions: 0 },
      repeat: 2,
    });
    expect((await http.put(`/api/agents/${agentId}/deploy-gate`, { enabled: true })).status).toBe(200);

    const failed = await run(agentId);
    expect(failed.status).toBe('failed');
    const c = failed.cases[0]!;
    expect(c.passRate).toBe(0);
    expect(c.repeats).toHaveLength(2);
    for (const a of c.repeats) {
      expect(a.verdict, JSON.stringify(a)).toBe('failed');
      expect(a.failures.map((f) => f.expectation)).toEqual(['maxAgentInterruptions']);
      const v = a.observed!.voice!;
      expect(v.agentInterruptions.count).toBeGreaterThanOrEqual(1);
      expect(v.agentInterruptions.totalMs).toBeGreaterThan(0);
      expect(v.talkMs.caller).toBeGreaterThan(2000);
      expect(a.observed!.userTurns).toEqual([LINE]);
    }
    expect((await goLive(agentId)).status).toBe(409);

    // the builder raises the minimum delay past the caller's pause: the same case passes, and the gate opens
    const patient = { turnDetection: 'vad', minEndpointingDelay: 3000, maxEndpointingDelay: 4000 };
    expect((await http.patch(`/api/agents/${agentId}`, { flow: flowOf({ agent: patient }) })).status).toBe(
      200,
    );
    const passed = await run(agentId);
    const p = passed.cases[0]!;
    expect(passed.status, JSON.stringify(p.repeats.map((a) => a.failures))).toBe('passed');
    expect(p.passRate).toBe(1);
    for (const a of p.repeats) {
      const v = a.observed!.voice!;
      expect(v.agentInterruptions.count).toBe(0);
      // answered after the whole line, the pause's wait included
      expect(v.turns).toHaveLength(1);
      expect(v.turns[0]!.responseMs).toBeGreaterThan(2500);
    }
    // the voice figures feed the run's latency as text figures do
    expect(passed.latency.responseMs).toBeGreaterThan(0);
    expect((await goLive(agentId)).status).toBe(200);
  }, 300_000);

  it('a barge-in is detected and the agent’s stop time measured; the caller hears through its own STT', async () => {
    const agentId = await newAgent('Talkative clinic', {
      ...flowOf({ agent: { turnDetection: 'vad', instructions: 'LONG answers.' } }),
    });
    await newCase(agentId, {
      name: 'stops when talked over',
      simulation: simulation(
        {
          stt: { provider: 'openai', baseURL: ear.baseURL },
          behaviour: { bargeIn: { afterMs: 1500 }, rate: 1.2 },
        },
        2,
      ),
      expect: { maxBargeInStopMs: 3000 },
      criteria: [{ name: 'answers', description: 'The agent answers every turn.' }],
    });
    const r = await run(agentId);
    const a = r.cases[0]!.repeats[0]!;
    expect(a.verdict, JSON.stringify(a)).toBe('passed');
    const v = a.observed!.voice!;
    expect(v.bargeIns).toHaveLength(1);
    // the agent stopped: after the VAD heard enough of the caller (minInterruptionDuration 0.5 s), not at once
    expect(v.bargeIns[0]!.stopMs).toBeGreaterThan(300);
    expect(v.bargeIns[0]!.stopMs).toBeLessThan(3000);
    expect(a.observed!.userTurns).toEqual([LINE, SECOND]);
    // its ear is the case's STT, with the request's key; its voice the flow's TTS at the asked speed
    expect(v.heard).toContain(HEARD);
    expect(ear.requests.transcriptions.length).toBeGreaterThan(0);
    expect(ear.requests.transcriptions[0]!.authorization).toBe(`Bearer ${KEY}`);
    expect(speech.requests.speech.some((s) => s.input === LINE && s.speed === 1.2)).toBe(true);
    // usage by role: the caller's TTS and STT are the simulator's
    const sim = a.observed!.usage.simulator;
    expect(sim.find((u) => u.kind === 'tts')?.ttsCharacters).toBe(LINE.length + SECOND.length);
    expect(sim.find((u) => u.kind === 'stt')?.sttAudioSeconds).toBeGreaterThan(5);
    expect(a.observed!.judgements).toEqual([expect.objectContaining({ passed: true })]);
    // the attempt is a browsable test session: the agent's side, the interrupted reply cut short
    const said = (await http.get(`/api/agents/${agentId}/test-sessions/${a.observed!.sessionId}/messages`))
      .body as { role: string; content: string }[];
    const long = said.find(
      (m) => m.role === 'assistant' && LONG.startsWith(m.content) && m.content !== SHORT,
    );
    expect(long?.content.length ?? 0).toBeLessThan(LONG.length);
    // recorded like any voice session; without noise, the caller's channel is silent while it listens
    expect(await quietestCallerSecond(agentId, a.observed!.sessionId)).toBeLessThan(50);
  }, 200_000);

  it('mixes background noise at the asked SNR; a slow TTS fails a latency bound that a fast one meets', async () => {
    const fast = await newAgent('Fast clinic', flowOf({ agent: { turnDetection: 'vad' } }));
    const slow = await newAgent(
      'Slow clinic',
      flowOf({ agent: { turnDetection: 'vad' }, ttsURL: slowSpeech.baseURL }),
    );
    const bounded = {
      name: 'answers within 3 s',
      // the caller's own voice is the fast stub either way: only the agent's TTS is slow
      simulation: simulation({
        tts: { provider: 'openai', voiceId: 'alloy', baseURL: speech.baseURL },
        behaviour: { noise: { snrDb: 10, kind: 'pink' } },
      }),
      expect: { maxResponseMs: 3000 },
    };
    await newCase(fast, bounded);
    await newCase(slow, bounded);
    const [f, s] = await Promise.all([run(fast), run(slow)]);
    const fa = f.cases[0]!.repeats[0]!;
    expect(fa.verdict, JSON.stringify(fa)).toBe('passed');
    const sa = s.cases[0]!.repeats[0]!;
    expect(sa.verdict, JSON.stringify(sa)).toBe('failed');
    expect(sa.failures.map((x) => x.expectation)).toEqual(['maxResponseMs']);
    expect(sa.observed!.voice!.turns[0]!.responseMs).toBeGreaterThan(3000);
    // the noise is on the line the agent heard, at the asked level (measured from what it received)
    for (const a of [fa, sa]) {
      const snr = a.observed!.voice!.noiseSnrDb!;
      expect(snr).toBeGreaterThan(7);
      expect(snr).toBeLessThan(13);
    }
    // and the attempt's recording shows it: the caller's channel never falls silent, even while it listens
    expect(await quietestCallerSecond(fast, fa.observed!.sessionId)).toBeGreaterThan(150);
  }, 200_000);

  it('a call the flow ends at its end step finishes with its verdict at once', async () => {
    const agentId = await newAgent('Closing clinic', flowOf({ agent: { instructions: 'ENDS at once.' } }));
    await newCase(agentId, {
      name: 'says goodbye',
      simulation: simulation({}, 3),
      expect: { endsAt: 'end', maxResponseMs: 8000 },
    });
    // the call is short (the greeting, one line, the goodbye): its verdict comes once the goodbye has played,
    // not at the case's timeout (TEST_CASE_TIMEOUT_MS, 120 s here) after a restart
    const startedAt = Date.now();
    const r = await run(agentId, 60_000);
    const c = r.cases[0]!;
    const a = c.repeats[0]!;
    expect(a.verdict, JSON.stringify(a)).toBe('passed');
    expect(c.attempts).toBe(1);
    expect(Date.now() - startedAt).toBeLessThan(60_000);
    expect(a.observed).toMatchObject({ ended: true, endedAt: 'end', endedBy: 'flow', userTurns: [LINE] });
    expect(a.observed!.voice!.turns).toHaveLength(1);
    const said = (await http.get(`/api/agents/${agentId}/test-sessions/${a.observed!.sessionId}/messages`))
      .body as { role: string; content: string }[];
    expect(said.at(-1)).toMatchObject({ role: 'assistant', content: GOODBYE });
  }, 90_000);

  it('bad input answers 400 naming the field', async () => {
    const agentId = await newAgent('Checked clinic', flowOf());
    const bad = async (body: Record<string, unknown>, path: string) => {
      const res = await http.post(`/api/agents/${agentId}/test-cases`, { name: 'bad', ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.issues.map((i: { path: string }) => i.path)).toContain(path);
    };
    await bad(
      { simulation: simulation({ tts: { provider: 'acme-voice' } }) },
      'body.simulation.voice.tts.provider',
    );
    await bad(
      { simulation: simulation({ behaviour: { bargeIn: { afterMs: -5 } } }) },
      'body.simulation.voice.behaviour.bargeIn.afterMs',
    );
    await bad(
      { simulation: simulation({ behaviour: { noise: { snrDb: 500 } } }) },
      'body.simulation.voice.behaviour.noise.snrDb',
    );
    await bad({ simulation: simulation({ behaviour: { rate: 9 } }) }, 'body.simulation.voice.behaviour.rate');
    const unknown = await http.post(`/api/agents/${agentId}/test-cases`, {
      name: 'bad',
      simulation: simulation({ behaviour: { shout: true } }),
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.issues).toEqual([
      expect.objectContaining({
        path: 'body.simulation.voice.behaviour',
        message: expect.stringContaining('shout'),
      }),
    ]);
    // the caller's voice and ear are held to the egress policy like a flow's: the attempt errors, naming it
    const inside = await newAgent('Checked clinic 2', flowOf());
    await newCase(inside, {
      name: 'a voice at an internal address',
      simulation: simulation({ tts: { provider: 'openai', baseURL: 'http://10.1.2.3/v1' } }),
    });
    const refused = await run(inside);
    expect(refused.status).toBe('errored');
    expect(refused.cases[0]!.repeats[0]!.error).toMatch(
      /^FLOW_INVALID: the caller voice cannot run \(caller voice: `baseURL`/,
    );
    // a voice bound on a text case
    await bad(
      { simulation: { ...simulation({}), voice: undefined }, expect: { maxResponseMs: 1000 } },
      'body.expect.maxResponseMs',
    );
  });
});
