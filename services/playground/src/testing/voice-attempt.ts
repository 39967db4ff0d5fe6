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
import type { Redactor } from '../sessions/redactor.js';
import type { HostedSessions } from '../sessions/hosted-sessions.js';
import type { CaseModelClient } from '../models/model-call.js';
import type { RunnableFlow } from '../models/model-factory.js';
import type { ConversationKit } from '../conversation/conversation-kit.js';
import type { Turn } from '../conversation/transcript.js';
import { BusAudioInput } from '../voice/bus-audio.js';
import { VoicePipeline } from '../voice/voice-pipeline.js';
import { CALLER_RATE } from './caller-line.js';
import { CallerVoice } from './voice-caller.js';
import { SimulatedCaller } from './simulator.js';

export interface VoiceAttemptSettings {
  /** How long the caller waits for the agent to answer before it goes on. */
  answerTimeoutMs: number;
  /** The agent quiet this long, its audio played out: its turn is over. */
  settleMs: number;
}

/** The caller's voice and ear, made and checked before the call (`ModelFactory.requireSpeech`). */
export interface CallerSpeech {
  tts: { model: tts.TTS; provider: string; modelName: string };
  stt: { model: stt.STT; provider: string; modelName: string };
}

/** What a voice attempt observed: the text attempt's fields, and the audio's figures. */
export interface VoiceTalk {
  sessionId: string;
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

export interface VoiceAttemptDeps {
  sessions: HostedSessions;
  kit: ConversationKit;
  req: RunCaseRequest;
  flow: RunnableFlow;
  simulator: CaseModelClient;
  speech: CallerSpeech;
  redactor: Redactor;
  requestId: string;
  settings: VoiceAttemptSettings;
  onError(err: unknown): AttemptError;
}

/**
 * One attempt of a voice simulated case: a spoken call between the simulated caller and the flow's agent,
 * over the same in-process pipeline as a builder's voice session (`VoicePipeline`), recorded as a test
 * session of type "test". The caller's model chooses each line from what it heard through its STT; its TTS
 * speaks it in real time, with the case's behaviours (seeded by the attempt's seed): a pause inside a
 * sentence, a silence before answering, a barge-in into the agent's reply, background noise, a speaking rate.
 */
export async function runVoiceAttempt(deps: VoiceAttemptDeps): Promise<VoiceTalk> {
  return new VoiceAttempt(deps).run();
}

class VoiceAttempt {
  private readonly input = new BusAudioInput(CALLER_RATE);
  private readonly caller: CallerVoice;
  private pipeline: VoicePipeline | undefined;
  private stopped = false;
  private readonly steps: string[] = [];
  private readonly replies: string[][] = [[]];
  private readonly metrics: TurnMetrics[] = [];
  private readonly transcript: Turn[] = [];
  private readonly userTurns: string[] = [];
  private readonly heardTurns: string[] = [];
  private endedBy: AttemptEnd = 'max_turns';
  private error: AttemptError | null = null;

  constructor(private readonly deps: VoiceAttemptDeps) {
    const { speech, req } = deps;
    this.caller = new CallerVoice({
      tts: speech.tts.model,
      stt: speech.stt.model,
      ttsId: { provider: speech.tts.provider, model: speech.tts.modelName },
      sttId: { provider: speech.stt.provider, model: speech.stt.modelName },
      behaviour: req.simulation!.voice!.behaviour,
      send: (pcm) => this.input.push(pcm),
      seed: req.seed ?? 0,
    });
  }

  async run(): Promise<VoiceTalk> {
    const { req, sessions, requestId } = this.deps;
    const sessionId = await this.open();
    try {
      try {
        await this.converse();
      } catch (err) {
        // the caller's voice failing (its TTS) ends the call as its model failing would: the attempt errors
        this.error ??= this.deps.onError(err);
      } finally {
        await this.caller.stop();
      }
      const conv = this.pipeline?.flowConversation;
      const ended = conv?.ended === true;
      if (ended && !this.error) this.endedBy = 'flow';
      const structured = ended && conv ? await conv.structuredOutput() : null;
      const figures = this.caller.timeline.figures({
        silenceBoundMs: req.expect.maxSilenceMs ?? DEFAULT_SILENCE_BOUND_MS,
        heard: this.heardTurns.filter((h) => h !== ''),
      });
      return {
        sessionId,
        steps: this.steps,
        replies: this.replies,
        metrics: this.metrics,
        userTurns: this.userTurns,
        transcript: this.transcript,
        ended,
        endedAt: ended ? (this.steps.at(-1) ?? null) : null,
        endedBy: this.endedBy,
        error: this.error,
        structured,
        agentUsage: conv?.usage() ?? [],
        callerUsage: this.caller.usage(),
        figures,
      };
    } finally {
      await sessions.end(sessionId, req.agentId, requestId);
    }
  }

  /** The test session with the voice pipeline, the caller's line open from before the greeting. */
  private async open(): Promise<string> {
    const { sessions, kit, req, flow, requestId } = this.deps;
    const { sessionId } = await sessions.open(
      {
        sessionType: 'test',
        agentId: req.agentId,
        version: req.version,
        requestId,
        failure: 'the test case could not start',
        redactor: this.deps.redactor,
      },
      async (ctx) => {
        const p = new VoicePipeline({
          kit,
          ctx,
          flow,
          apiKeys: req.apiKeys ?? undefined,
          requestId,
          input: this.input,
          output: (hooks) => this.caller.sink(hooks),
          mocks: req.mocks,
          observe: {
            event: (e) => {
              if (e.type === 'step_entered' && this.steps.at(-1) !== e.stepId) this.steps.push(e.stepId);
            },
            message: (m) => {
              if (m.role === 'user') this.replies.push([]);
              else {
                this.replies.at(-1)!.push(m.content);
                if (m.metrics) this.metrics.push(m.metrics);
              }
            },
          },
        });
        this.pipeline = p;
        ctx.onStop(async () => {
          this.stopped = true;
          await this.caller.stop();
          await p.close();
        });
        this.caller.start();
        await p.start();
        return { result: undefined };
      },
    );
    return sessionId;
  }

  private flowEnded(): boolean {
    return this.stopped || (this.pipeline?.flowConversation?.ended ?? false);
  }

  /** The agent spoke since frame `from` and went quiet, its audio played out; or nothing came in time. */
  private async agentDone(from: number): Promise<void> {
    const { caller } = this;
    const { settleMs, answerTimeoutMs } = this.deps.settings;
    const spoke = await caller.until(
      () =>
        this.flowEnded() ||
        (caller.agentHeardSince(from) && caller.agentQuietMs >= settleMs && !caller.agentSpeaking),
      answerTimeoutMs,
    );
    // what it said reaches the caller's ear a moment after it is heard (the STT's own delay)
    if (spoke && caller.agentHeardSince(from)) await caller.until(() => caller.hasHeard, settleMs);
  }

  /** What the caller heard since its last line goes on its side of the transcript. */
  private hear(): void {
    const heard = this.caller.takeHeard();
    this.heardTurns.push(heard);
    if (heard) this.transcript.push({ role: 'assistant', content: heard });
  }

  /**
   * The call: the greeting heard, then each line the caller's model chooses, spoken, and the agent's answer
   * awaited — or, on a barge-in, the next line spoken `afterMs` into that answer.
   */
  private async converse(): Promise<void> {
    const { caller } = this;
    const simulation = this.deps.req.simulation!;
    const bargeIn = simulation.voice!.behaviour.bargeIn;
    await this.agentDone(0);
    const sim = new SimulatedCaller(this.deps.simulator, simulation);
    let bargeAt: number | undefined;
    for (let i = 0; i < simulation.maxTurns && !this.flowEnded(); i++) {
      const turn = caller.drawTurn();
      if (bargeAt === undefined) this.hear();
      let move;
      try {
        move = await sim.next(this.transcript);
      } catch (err) {
        this.error = this.deps.onError(err);
        break;
      }
      if ('end' in move) {
        this.endedBy = move.end;
        break;
      }
      const line = await caller.prepare(move.say, turn);
      if (bargeAt !== undefined) {
        const at = bargeAt;
        await caller.until(() => this.flowEnded() || Date.now() >= at, Math.max(0, at - Date.now()) + 1000);
      }
      if (this.flowEnded()) break;
      const barging = bargeAt !== undefined;
      bargeAt = undefined;
      this.userTurns.push(move.say);
      this.transcript.push({ role: 'user', content: move.say });
      await caller.say(line.pcm, barging);
      const from = caller.framesSent;
      if (turn.bargeIn && bargeIn && i + 1 < simulation.maxTurns) {
        // the next line goes in `afterMs` after the agent starts answering this one
        const started = await caller.until(
          () => this.flowEnded() || caller.agentHeardSince(from),
          this.deps.settings.answerTimeoutMs,
        );
        if (started && !this.flowEnded()) {
          bargeAt = Date.now() + bargeIn.afterMs;
          continue;
        }
      }
      await this.agentDone(from);
    }
    if (bargeAt !== undefined) await this.agentDone(caller.framesSent);
    this.hear();
  }
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
