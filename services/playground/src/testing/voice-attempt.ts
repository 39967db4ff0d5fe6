import type { stt, tts } from '@livekit/agents';
import {
  type AttemptEnd,
  type AttemptError,
  type ModelUsage,
  type RunCaseRequest,
  type SessionUsage,
  type TurnMetrics,
  type VoiceFigures,
} from '@vab/contracts';
import type { Redactor } from '../host/redactor.js';
import type { SessionHost } from '../host/session-host.js';
import type { CaseModelClient } from '../model-call.js';
import type { RunnableFlow } from '../readiness.js';
import type { ConversationKit } from '../runtime/conversations.js';
import type { Turn } from '../runtime/transcript.js';
import { BusAudioInput } from '../transports/voice-socket/bus-audio.js';
import { VoicePipeline } from '../transports/voice-pipeline.js';
import { CALLER_RATE, CallerVoice } from './voice-caller.js';
import { SimulatedCaller } from './simulator.js';

export interface VoiceAttemptSettings {
  /** How long the caller waits for the agent to answer before it goes on. */
  answerTimeoutMs: number;
  /** The agent quiet this long, its audio played out: its turn is over. */
  settleMs: number;
}

/** The caller's voice and ear, made and checked before the call (readiness.requireSpeech). */
export interface CallerSpeech {
  tts: { model: tts.TTS; provider: string; modelName: string };
  stt: { model: stt.STT; provider: string; modelName: string };
}

/** What a voice attempt observed: the text attempt's fields, and the audio's figures. */
export interface VoiceTalk {
  key: string;
  steps: string[];
  replies: string[][];
  metrics: TurnMetrics[];
  userTurns: string[];
  /** What the caller said and heard: what its judges read. */
  transcript: Turn[];
  ended: boolean;
  endedAt: string | null;
  endedBy: AttemptEnd;
  error: AttemptError | null;
  structured: Record<string, unknown> | null;
  agentUsage: SessionUsage;
  callerUsage: ModelUsage[];
  figures: VoiceFigures;
}

/** The bound silences are reported over when the case sets none. */
const DEFAULT_SILENCE_BOUND_MS = 2000;

/**
 * One attempt of a voice simulated case: a spoken call between the simulated caller and the flow's agent,
 * over the same in-process pipeline as a builder's voice session (`VoicePipeline`), recorded as a test
 * session of type "test". The caller's model chooses each line from what it heard through its STT; its TTS
 * speaks it in real time, with the case's behaviours (seeded by the attempt's seed): a pause inside a
 * sentence, a silence before answering, a barge-in into the agent's reply, background noise, a speaking rate.
 */
export async function runVoiceAttempt(deps: {
  host: SessionHost;
  kit: ConversationKit;
  req: RunCaseRequest;
  flow: RunnableFlow;
  simulator: CaseModelClient;
  speech: CallerSpeech;
  redactor: Redactor;
  requestId: string;
  settings: VoiceAttemptSettings;
  onError(err: unknown): AttemptError;
}): Promise<VoiceTalk> {
  const { host, kit, req, flow, speech, requestId, settings } = deps;
  const simulation = req.simulation!;
  const voiceSim = simulation.voice!;
  const input = new BusAudioInput(CALLER_RATE);
  const caller = new CallerVoice({
    tts: speech.tts.model,
    stt: speech.stt.model,
    ttsId: { provider: speech.tts.provider, model: speech.tts.modelName },
    sttId: { provider: speech.stt.provider, model: speech.stt.modelName },
    behaviour: voiceSim.behaviour,
    send: (pcm) => input.push(pcm),
    seed: req.seed ?? 0,
  });
  const steps: string[] = [];
  const replies: string[][] = [[]];
  const metrics: TurnMetrics[] = [];
  let stopped = false;
  let pipeline: VoicePipeline | undefined;
  const { key } = await host.open(
    {
      sessionType: 'test',
      agentId: req.agentId,
      version: req.version,
      requestId,
      failure: 'the test case could not start',
      redactor: deps.redactor,
    },
    async (ctx) => {
      const p = new VoicePipeline({
        kit,
        ctx,
        flow,
        apiKeys: req.apiKeys ?? undefined,
        requestId,
        input,
        output: (hooks) => caller.sink(hooks),
        mocks: req.mocks,
        observe: {
          event: (e) => {
            if (e.type === 'step_entered' && steps.at(-1) !== e.stepId) steps.push(e.stepId);
          },
          message: (m) => {
            if (m.role === 'user') replies.push([]);
            else {
              replies.at(-1)!.push(m.content);
              if (m.metrics) metrics.push(m.metrics);
            }
          },
        },
      });
      pipeline = p;
      ctx.onStop(async () => {
        stopped = true;
        await caller.stop();
        await p.close();
      });
      // the caller's clock runs from before the greeting: the line is open as the agent starts
      caller.start();
      await p.start();
      return { result: undefined };
    },
  );

  const flowEnded = () => stopped || (pipeline?.flowConversation?.ended ?? false);
  const transcript: Turn[] = [];
  const userTurns: string[] = [];
  const heardTurns: string[] = [];
  let endedBy: AttemptEnd = 'max_turns';
  let error: AttemptError | null = null;

  /** The agent spoke since `from` and went quiet, its audio played out; or nothing came in time. */
  const agentDone = async (from: number) => {
    const spoke = await caller.until(
      () =>
        flowEnded() ||
        (caller.agentHeardSince(from) && caller.agentQuietMs >= settings.settleMs && !caller.agentSpeaking),
      settings.answerTimeoutMs,
    );
    // what it said reaches the caller's ear a moment after it is heard (the STT's own delay)
    if (spoke && caller.agentHeardSince(from)) await caller.until(() => caller.hasHeard, settings.settleMs);
  };
  const hear = () => {
    const heard = caller.takeHeard();
    heardTurns.push(heard);
    if (heard) transcript.push({ role: 'assistant', content: heard });
  };

  try {
    await agentDone(0);
    const sim = new SimulatedCaller(deps.simulator, simulation);
    let bargeAt: number | undefined;
    for (let i = 0; i < simulation.maxTurns && !flowEnded(); i++) {
      const turn = caller.drawTurn();
      if (bargeAt === undefined) hear();
      let move;
      try {
        move = await sim.next(transcript);
      } catch (err) {
        error = deps.onError(err);
        break;
      }
      if ('end' in move) {
        endedBy = move.end;
        break;
      }
      const line = await caller.prepare(move.say, turn);
      if (bargeAt !== undefined) {
        const at = bargeAt;
        await caller.until(() => flowEnded() || Date.now() >= at, Math.max(0, at - Date.now()) + 1000);
      }
      if (flowEnded()) break;
      const barging = bargeAt !== undefined;
      bargeAt = undefined;
      userTurns.push(move.say);
      transcript.push({ role: 'user', content: move.say });
      await caller.say(line.pcm, barging);
      const from = caller.framesSent;
      const bargeIn = voiceSim.behaviour.bargeIn;
      if (turn.bargeIn && bargeIn && i + 1 < simulation.maxTurns) {
        // the next line goes in `afterMs` after the agent starts answering this one
        const started = await caller.until(
          () => flowEnded() || caller.agentHeardSince(from),
          settings.answerTimeoutMs,
        );
        if (started && !flowEnded()) {
          bargeAt = Date.now() + bargeIn.afterMs;
          continue;
        }
      }
      await agentDone(from);
    }
    if (bargeAt !== undefined) await agentDone(caller.framesSent);
    hear();
  } finally {
    await caller.stop();
  }
  const conv = pipeline?.flowConversation;
  const ended = conv?.ended === true;
  if (ended && !error) endedBy = 'flow';
  const structured = ended && conv ? await conv.structuredOutput() : null;
  const agentUsage = conv?.usage() ?? [];
  const figures = caller.timeline.figures({
    silenceBoundMs: req.expect.maxSilenceMs ?? DEFAULT_SILENCE_BOUND_MS,
    heard: heardTurns.filter((h) => h !== ''),
  });
  await host.end(key, req.agentId, requestId);
  return {
    key,
    steps,
    replies,
    metrics,
    userTurns,
    transcript,
    ended,
    endedAt: ended ? (steps.at(-1) ?? null) : null,
    endedBy,
    error,
    structured,
    agentUsage,
    callerUsage: caller.usage(),
    figures,
  };
}

/** The figures as a judge reads them, beside the transcript. */
export function figuresText(f: VoiceFigures): string {
  const turns = f.turns
    .map((t, i) => `turn ${i + 1}: ${t.responseMs === null ? 'no answer' : `${t.responseMs} ms`}`)
    .join('; ');
  const barge = f.bargeIns
    .map((b) => (b.stopMs === null ? 'the agent never stopped' : `the agent stopped after ${b.stopMs} ms`))
    .join('; ');
  return [
    `Measured from the call's audio (${Math.round(f.durationMs / 1000)} s):`,
    `- response time (end of the caller's speech to the agent's first audio): ${turns || 'no caller turns'}`,
    `- the agent talked over the caller ${f.agentInterruptions.count} time(s), ${f.agentInterruptions.totalMs} ms in all`,
    `- barge-ins by the caller: ${barge || 'none'}`,
    `- longest silence the agent left: ${f.longestSilenceMs} ms (${f.silences.length} over ${f.silenceBoundMs} ms)`,
    `- talk time: agent ${f.talkMs.agent} ms, caller ${f.talkMs.caller} ms`,
    ...(f.noiseSnrDb !== null ? [`- background noise on the caller's line: SNR ${f.noiseSnrDb} dB`] : []),
  ].join('\n');
}
