import type { BusClient } from '@vab/bus';
import { modelKindOf } from '@vab/flow';
import {
  Subjects,
  unmetExpectations,
  type AttemptEnd,
  type AttemptError,
  type CaseObservation,
  type Flow,
  type Judgement,
  type RunCaseRequest,
  type SessionUsage,
  type TurnResult,
} from '@vab/contracts';
import { sessionRedactor, type Redactor } from '../sessions/redactor.js';
import type { HostedSessions } from '../sessions/hosted-sessions.js';
import type { KeyEnv } from '../models/provider-keys.js';
import type { ModelFactory, RunnableFlow } from '../models/model-factory.js';
import type { BesideModel } from '../models/readiness.js';
import type { FlowConversation } from '../conversation/conversation.js';
import type { Turn } from '../conversation/decide.js';
import { judgeCriteria } from './judges.js';
import { CaseModelClient, ModelAnswerError } from '../models/model-call.js';
import { SimulatedCaller } from './simulator.js';
import type { ConversationKit } from '../conversation/conversation-kit.js';
import {
  figuresText,
  runVoiceAttempt,
  type CallerSpeech,
  type VoiceAttemptSettings,
} from './voice-attempt.js';
import type { TextTransport } from '../transports/text.js';

/** The flow with every language model's temperature set to `temperature` (a case's override). */
export function withTemperature(flow: Flow, temperature: number): Flow {
  return {
    ...flow,
    nodes: flow.nodes.map((n) => (modelKindOf(String(n.nodeType)) === 'llm' ? { ...n, temperature } : n)),
  };
}

/** An attempt that errored on its simulator or judge: what it said, and what the model answered. */
function attemptError(role: AttemptError['role'], err: unknown): AttemptError {
  if (err instanceof ModelAnswerError) return { role, message: err.message, raw: err.raw };
  return { role, message: err instanceof Error ? err.message : String(err), raw: null };
}

/**
 * One attempt of a regression test case, run here from start to end: a text conversation on the stored
 * version's flow, recorded as a test session of type "test". Its user turns are the case's script, or chosen
 * one at a time by a simulated caller (a model given the case's persona and goal). Mocked tools and webhooks
 * answer what the case fixed. When the expectations hold, a judge model decides each criterion. Answers what
 * happened; the sessions service gives the verdict.
 */
export class TestCaseAttempts {
  constructor(
    private readonly deps: {
      sessions: HostedSessions;
      bus: BusClient;
      models: ModelFactory;
      text: TextTransport;
      kit: ConversationKit;
      env(): Promise<KeyEnv>;
      /** How a simulated voice caller waits on the agent. */
      voiceSim: VoiceAttemptSettings;
      busTimeoutMs: number;
      /** Bound on one call of the simulator's or the judge's model. */
      modelTimeoutMs: number;
    },
  ) {}

  async run(req: RunCaseRequest, requestId: string): Promise<CaseObservation> {
    const { bus, models } = this.deps;
    const stored = await bus.request(
      Subjects.agentsVersionsGet,
      { id: req.agentId, version: req.version },
      { timeoutMs: this.deps.busTimeoutMs, requestId },
    );
    const flow = req.temperature === null ? stored.flow : withTemperature(stored.flow, req.temperature);
    const env = await this.deps.env();
    const voiceSim = req.simulation?.voice;
    // a voice case's flow must run as a voice session does (its TTS and STT too); it is recorded as a test
    const runnable = models.require(flow, voiceSim ? 'voice' : 'test', env, req.apiKeys, {
      seed: req.seed,
    });
    // the models beside the flow are checked before the conversation: one that cannot run errors the case
    // with the readiness issues, as a flow's own model does; they take the attempt's seed too, so the whole
    // attempt runs again the same way
    const agentModel = runnable.config.providers.llm;
    const client = (who: BesideModel, choice: RunCaseRequest['judgeModel'] | undefined) =>
      new CaseModelClient(
        models.requireModel(who, choice, agentModel, env, req.apiKeys, req.seed),
        this.deps.modelTimeoutMs,
      );
    const simulator = req.simulation
      ? client({ role: 'simulator', setting: 'simulation.model' }, req.simulation.model)
      : undefined;
    const judge =
      req.criteria.length > 0 ? client({ role: 'judge', setting: 'judgeModel' }, req.judgeModel) : undefined;
    const redactor = sessionRedactor(env, req.apiKeys);

    const { observed, transcript } =
      voiceSim && simulator
        ? await this.voiceCall(req, runnable, env, simulator, redactor, requestId)
        : await this.textCall(req, runnable, simulator, requestId);
    const error = observed.error;
    // the expectations need no model and decide first: a conversation that fails them is not judged
    if (judge && !error && unmetExpectations(req.expect, observed).length === 0) {
      let judgements: Judgement[] | null = null;
      try {
        // a voice call's judges read what the caller heard, with the figures measured from its audio
        judgements = await judgeCriteria(
          judge,
          req.criteria,
          transcript,
          observed.voice ? figuresText(observed.voice) : undefined,
        );
      } catch (err) {
        observed.error = attemptError('judge', err);
      }
      observed.judgements = judgements;
      observed.usage.judge = judge.usage();
    }
    // a simulator's or judge's error may echo a key: the observation leaves with none
    return redactor.deep(observed);
  }

  /** A text attempt: the typed conversation, its observation, and the transcript the judges read. */
  private async textCall(
    req: RunCaseRequest,
    runnable: RunnableFlow,
    simulator: CaseModelClient | undefined,
    requestId: string,
  ): Promise<{ observed: CaseObservation; transcript: Turn[] }> {
    const { sessions, text } = this.deps;
    const { sessionId, result, conversation } = await text.open(req.agentId, runnable, {
      sessionType: 'test',
      version: req.version,
      apiKeys: req.apiKeys,
      failure: 'the test case could not start',
      requestId,
      mocks: req.mocks,
    });
    const talk = await this.talk(req, sessionId, result, conversation, simulator, requestId).finally(() =>
      sessions.end(sessionId, req.agentId, requestId),
    );
    const { steps, replies, metrics, userTurns, last, endedBy, error, structured, agentUsage } = talk;
    const observed: CaseObservation = {
      sessionId,
      steps,
      replies,
      ended: last.ended,
      endedAt: last.ended ? last.stepId : null,
      structured,
      metrics,
      userTurns,
      endedBy,
      seed: runnable.seed,
      judgements: null,
      usage: { agent: agentUsage, simulator: simulator?.usage() ?? [], judge: [] },
      error,
      voice: null,
    };
    return { observed, transcript: talk.transcript };
  }

  /**
   * A voice attempt: the caller's voice and ear checked like the flow's own before the call (one that cannot
   * run errors the case with the readiness issues), then the spoken call.
   */
  private async voiceCall(
    req: RunCaseRequest,
    runnable: RunnableFlow,
    env: KeyEnv,
    simulator: CaseModelClient,
    redactor: Redactor,
    requestId: string,
  ): Promise<{ observed: CaseObservation; transcript: Turn[] }> {
    const { models } = this.deps;
    const voiceSim = req.simulation!.voice!;
    const speech = {
      tts: models.requireSpeech(
        { role: 'caller voice', setting: 'simulation.voice.tts' },
        'tts',
        voiceSim.tts,
        runnable.config,
        env,
        req.apiKeys,
        { speed: voiceSim.behaviour.rate },
      ) as CallerSpeech['tts'],
      stt: models.requireSpeech(
        { role: 'caller ear', setting: 'simulation.voice.stt' },
        'stt',
        voiceSim.stt,
        runnable.config,
        env,
        req.apiKeys,
      ) as CallerSpeech['stt'],
    };
    const talk = await runVoiceAttempt({
      sessions: this.deps.sessions,
      kit: this.deps.kit,
      req,
      flow: runnable,
      simulator,
      speech,
      redactor,
      requestId,
      settings: this.deps.voiceSim,
      onError: (err) => attemptError('simulator', err),
    });
    const observed: CaseObservation = {
      sessionId: talk.sessionId,
      steps: talk.steps,
      replies: talk.replies,
      ended: talk.ended,
      endedAt: talk.endedAt,
      structured: talk.structured,
      metrics: talk.metrics,
      userTurns: talk.userTurns,
      endedBy: talk.endedBy,
      seed: runnable.seed,
      judgements: null,
      usage: { agent: talk.agentUsage, simulator: [...simulator.usage(), ...talk.callerUsage], judge: [] },
      error: talk.error,
      voice: talk.figures,
    };
    return { observed, transcript: talk.transcript };
  }

  /**
   * The conversation of one attempt: the script's turns, or the simulated caller's until the flow ends, the
   * caller hangs up, or `maxTurns`. A simulator that fails stops it with the attempt's error.
   */
  private async talk(
    req: RunCaseRequest,
    sessionId: string,
    result: TurnResult,
    conversation: FlowConversation,
    simulator: CaseModelClient | undefined,
    requestId: string,
  ) {
    const steps = [result.stepId];
    const replies = [result.replies];
    const metrics = result.metrics ? [result.metrics] : [];
    const userTurns: string[] = [];
    const transcript: Turn[] = result.replies.map((r) => ({ role: 'assistant', content: r }));
    let last: Pick<TurnResult, 'ended' | 'stepId'> = { ended: result.ended, stepId: result.stepId };
    let endedBy: AttemptEnd = 'turns';
    let error: AttemptError | null = null;
    const say = async (said: string) => {
      const turn = await this.deps.sessions.turn({
        sessionId,
        agentId: req.agentId,
        text: said,
        requestId,
      });
      userTurns.push(said);
      transcript.push({ role: 'user', content: said });
      for (const r of turn.replies) transcript.push({ role: 'assistant', content: r });
      steps.push(...turn.stepChanges.map((c) => c.stepId));
      replies.push(turn.replies);
      if (turn.metrics) metrics.push(turn.metrics);
      last = turn;
    };
    if (simulator && req.simulation) {
      const caller = new SimulatedCaller(simulator, req.simulation);
      endedBy = 'max_turns';
      for (let i = 0; i < req.simulation.maxTurns && !last.ended; i++) {
        let move;
        try {
          move = await caller.next(transcript);
        } catch (err) {
          error = attemptError('simulator', err);
          break;
        }
        if ('end' in move) {
          endedBy = move.end;
          break;
        }
        await say(move.say);
      }
    } else {
      for (const said of req.turns) {
        if (last.ended) break;
        await say(said);
      }
    }
    if (last.ended && !error) endedBy = 'flow';
    const structured = last.ended ? await conversation.structuredOutput() : null;
    const agentUsage: SessionUsage = conversation.usage();
    return { steps, replies, metrics, userTurns, transcript, last, endedBy, error, structured, agentUsage };
  }
}
