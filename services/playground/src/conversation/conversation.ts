import { safeError } from '@vab/bus';
import { llm, voice } from '@livekit/agents';
import type {
  SessionEventInput,
  SessionMessage,
  SessionUsage,
  StepChange,
  TurnFailure,
  TurnMetrics,
  TurnResult,
} from '@vab/contracts';
import {
  COMPLETE_STEP_TOOL,
  initialState,
  isBranch,
  step as engineStep,
  type EngineAction,
  type EngineEvent,
  type EngineState,
  type PostStep,
  type TransferFailureReason,
} from '@vab/flow';
import type { Logger } from 'pino';
import { modelKindLabel, playgroundMetrics, providerLabel } from '../observability/metrics.js';
import { messageMetrics, redact, TurnClock, turnFailureOf, usageOf } from './figures.js';
import { agentOptions, FlowAgent, type FlowRuntime, type TurnAnswer } from './flow-runtime.js';
import type { ConversationMode } from './conversation-mode.js';
import { spokenWords } from './spoken-text.js';
import { evaluateBranch, type Turn } from './decide.js';
import { ReplyTap } from './reply-tap.js';
import type { ToolObserver } from './mcp.js';

/** A completed model call LiveKit measured (a streamed STT reports no duration: left out). */
function observeModelCall(m: { type: string; durationMs?: number; metadata?: { modelProvider?: string } }) {
  const kind = modelKindLabel(m.type);
  if (kind === 'other' || !m.durationMs) return;
  playgroundMetrics().modelCalls.observe(
    { kind, provider: providerLabel(m.metadata?.modelProvider) },
    m.durationMs / 1000,
  );
}

export type TransferTarget = { ok: true; flow: FlowRuntime } | { ok: false; reason: TransferFailureReason };
export type NumberTransfer = { ok: true } | { ok: false; reason: TransferFailureReason };

export interface ConversationDeps {
  flow: FlowRuntime;
  /** Typed or spoken turns: the transport's. */
  mode: ConversationMode;
  /** The transport's LiveKit session: in a room (voice), or without one and with manual turns (text). */
  session: voice.AgentSession;
  /** Starts the session with its first agent. */
  startSession(agent: FlowAgent): Promise<void>;
  /** Another stored agent's flow, checked and opened, for a transfer step. */
  loadTransferTarget(agentId: string): Promise<TransferTarget>;
  /**
   * Hands the call to a person at a phone number (a phone call's transport only): resolves once it is handed
   * over (the transport then ends the session, `transferred`), or with why not. Absent: `unavailable`.
   */
  transferToNumber?(targetNumber: string): Promise<NumberTransfer>;
  /** Every transcript message, with the step that was current. Must not throw. */
  record(message: SessionMessage): void;
  /** Adds an event to the session's stream. Must not throw. */
  emit(event: SessionEventInput): void;
  /** The id of the session's last event. */
  lastEventId(): number;
  onStepChange?(change: StepChange): void;
  /** The conversation has ended (goodbye said, or a failed transfer). Called once. */
  onEnded?(): void;
  /** Runs what follows an end step, on the flow that reached it. */
  postProcess(
    steps: PostStep[],
    conversation: Turn[],
    flow: FlowRuntime,
  ): Promise<Record<string, unknown> | undefined>;
  log: Logger;
  now?: () => number;
  branchTimeoutMs: number;
  /** Voice: the figures the transport measured from the audio for the turn just answered (taken once). */
  audioFigures?: (() => Partial<TurnMetrics>) | undefined;
}

/** One pass over the actions an event led to, and what it carries from one action to the next. */
interface Pass {
  queue: EngineAction[];
  /** The user's turn not yet in the model's context (a text turn, until a reply takes it along). */
  userInput: string | undefined;
  endRequested: boolean;
}

type ActionHandlers = {
  [T in EngineAction['type']]: (
    action: Extract<EngineAction, { type: T }>,
    pass: Pass,
  ) => Promise<void> | void;
};

/** Bound on LiveKit making a transfer's agent the active one. */
const HANDOFF_TIMEOUT_MS = 10_000;

/**
 * One conversation with a flow. The pure step engine decides; this class only carries its actions out on a
 * LiveKit `voice.AgentSession` (instructions and tools per step, literal or generated speech, branch
 * evaluation, transfers as LiveKit handoffs to the target flow's agent). User turns are taken one at a time.
 */
export class FlowConversation {
  private flow: FlowRuntime;
  /** Every flow this conversation opened (its own, and each transfer's target): closed at the end. */
  private readonly flows: FlowRuntime[] = [];
  private agent: FlowAgent;
  private state: EngineState;
  private readonly transcript: Turn[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private queue: Promise<unknown> = Promise.resolve();
  /** What is queued or under way on `queue`. */
  private running = 0;
  /** The session's speeches not yet done (spoken sessions), by id: what LiveKit answers a turn with. */
  private readonly speeches = new Map<string, voice.SpeechHandle>();
  private collecting:
    | {
        replies: string[];
        stepChanges: StepChange[];
        clock: TurnClock;
        /** A text turn's agent messages: recorded when it ends, the last one with the turn's figures. */
        messages: SessionMessage[];
        metrics?: TurnMetrics;
        /** The turn's first model failure: the answer says the turn failed. */
        failure?: TurnFailure;
      }
    | undefined;
  private readonly replyTap: ReplyTap;
  /** The audio output's last playback report not yet taken by a message (spoken sessions). */
  private lastPlayback: voice.PlaybackFinishedEvent | undefined;
  /** The TTS failure reported for the speech under way (spoken sessions): reported once per speech. */
  private ttsFailure: string | undefined;
  private closed = false;
  private endedNotified = false;
  private postProcessing: Promise<Record<string, unknown> | undefined> | undefined;
  /**
   * Actions a `complete_step` call led to that must wait for the end of the reply it was made in (a
   * transfer's handoff would cut that reply off): carried out with the actions of the `assistant_turn` that
   * reply ends with.
   */
  private readonly afterReply: EngineAction[] = [];
  private readonly now: () => number;

  constructor(private readonly deps: ConversationDeps) {
    this.flow = deps.flow;
    this.flows.push(deps.flow);
    this.state = initialState(deps.flow.config);
    this.now = deps.now ?? Date.now;
    this.agent = this.makeAgent(deps.flow);
    this.replyTap = new ReplyTap((replyId, delta) =>
      this.deps.emit({ type: 'agent_reply_delta', replyId, delta, stepId: this.state.stepId }),
    );
    const { session } = deps;
    session.on(voice.AgentSessionEventTypes.ConversationItemAdded, (ev) => {
      const item = ev.item;
      if (item.type !== 'message' || item.role !== 'assistant') return;
      const text = this.heardOf(item);
      if (text === '') return;
      this.agentSaid(text, item.metrics);
    });
    session.on(voice.AgentSessionEventTypes.MetricsCollected, (ev) => {
      if (ev.metrics.type === 'llm_metrics') this.collecting?.clock.llmCall(ev.metrics);
      // LiveKit reports a turn's end-of-utterance figures only for a turn it answers itself (`spokenTurn`)
      if (ev.metrics.type === 'eou_metrics') this.livekitAnswering(ev.metrics.speechId);
      observeModelCall(ev.metrics);
    });
    if (deps.mode.hears) {
      session.on(voice.AgentSessionEventTypes.SpeechCreated, ({ speechHandle }) => {
        this.ttsFailure = undefined;
        this.speeches.set(speechHandle.id, speechHandle);
        speechHandle.addDoneCallback(() => this.speeches.delete(speechHandle.id));
      });
    }
    session.on(voice.AgentSessionEventTypes.Error, (ev) => {
      const source = (ev.error as { type?: string }).type ?? 'error';
      playgroundMetrics().modelErrors.inc({
        kind: modelKindLabel(source),
        provider: providerLabel((ev.source as { provider?: string } | undefined)?.provider),
      });
      const failure = turnFailureOf(ev, (m) => this.flow.config.providers[m].nodeId);
      if (failure?.modality === 'tts') {
        // LiveKit asks a TTS once per sentence: its other sentences failing alike are the same failure
        const key = `${failure.kind} ${failure.status ?? ''} ${failure.message}`;
        if (key === this.ttsFailure) return;
        this.ttsFailure = key;
      }
      if (failure && this.collecting) this.collecting.failure ??= failure;
      const message =
        failure?.message ?? redact(String((ev.error as { error?: Error }).error?.message ?? source));
      this.deps.emit({
        type: 'error',
        code: source.toUpperCase(),
        message,
        stepId: this.state.stepId,
        ...(failure ? { nodeId: failure.nodeId, kind: failure.kind } : {}),
      });
    });
    if (deps.mode.hears) {
      session.on(voice.AgentSessionEventTypes.UserInputTranscribed, (ev) =>
        this.deps.emit({
          type: 'user_turn',
          text: ev.transcript,
          final: ev.isFinal,
          stepId: this.state.stepId,
        }),
      );
    }
  }

  /**
   * An agent message's text as far as the caller heard it. LiveKit cuts an interrupted generated reply itself,
   * to the transcript its audio output reported heard, but keeps a `say` (a literal greeting or goodbye) whole,
   * interrupted or not: such a message is cut here to that transcript, in the history and in the model's
   * context alike (the message is the one the context holds). Each message takes the output's last report
   * once, so a report never stands for a later message.
   */
  private heardOf(item: llm.ChatMessage): string {
    const written = item.textContent ?? '';
    // a spoken reply is what was spoken: its words as long as speech takes them (the context holds the same)
    const text = this.deps.mode.speaks ? spokenWords(written) : written;
    if (text !== written) item.content = [text];
    const report = this.lastPlayback;
    this.lastPlayback = undefined;
    const heard = report?.interrupted ? report.synchronizedTranscript : undefined;
    if (!item.interrupted || heard === undefined || heard === text || !text.startsWith(heard)) return text;
    item.content = [heard];
    return heard;
  }

  /** An agent message: an event now; on the transcript now (voice) or when its text turn ends. */
  private agentSaid(text: string, report: llm.MetricsReport | undefined): void {
    this.transcript.push({ role: 'assistant', content: text });
    const stepId = this.state.stepId;
    this.deps.emit({ type: 'agent_reply', replyId: this.replyTap.replyIdOf(text), text, stepId });
    const message: SessionMessage = { role: 'assistant', content: text, stepId, timestamp: this.now() };
    const turn = this.collecting;
    if (this.deps.mode.records === 'at-turn-end' && turn) {
      turn.replies.push(text);
      turn.clock.reply(report);
      turn.messages.push(message);
      return;
    }
    turn?.replies.push(text);
    const metrics = { ...messageMetrics(report), ...this.deps.audioFigures?.() };
    if (Object.keys(metrics).length > 0) {
      message.metrics = metrics;
      this.deps.emit({ type: 'turn_metrics', stepId, metrics });
    }
    this.deps.record(message);
  }

  /** The text of the reply being spoken (or spoken last): what an interrupted one is cut from. */
  replyText(): string | undefined {
    return this.replyTap.lastText();
  }

  /** What the session used so far, per provider and model (LiveKit's usage collector). */
  usage(): SessionUsage {
    return usageOf(this.deps.session.usage);
  }

  /** A tool of the flow (MCP) was called: events, and its time counts in the turn's figures. */
  readonly tools: ToolObserver = {
    called: (name, args) => {
      const callId = `${name}-${++this.toolCalls}`;
      const stepId = this.state.stepId;
      const startedAt = this.now();
      this.deps.emit({ type: 'tool_called', callId, name, source: 'mcp', arguments: args, stepId });
      return (outcome) => {
        const durationMs = Math.max(0, this.now() - startedAt);
        this.collecting?.clock.tool(durationMs);
        playgroundMetrics().toolCalls.observe(
          { source: 'mcp', outcome: 'error' in outcome ? 'error' : 'ok' },
          durationMs / 1000,
        );
        this.deps.emit({
          type: 'tool_result',
          callId,
          name,
          source: 'mcp',
          durationMs,
          stepId,
          ...('error' in outcome ? { error: redact(outcome.error) } : { result: outcome.result }),
        });
      };
    },
  };
  private toolCalls = 0;

  /** The step the conversation is at. */
  get stepId(): string {
    return this.state.stepId;
  }

  get ended(): boolean {
    return this.state.phase === 'ended' || this.closed;
  }

  private makeAgent(flow: FlowRuntime, chatCtx?: llm.ChatContext): FlowAgent {
    return new FlowAgent(
      agentOptions(flow, this.deps.mode, chatCtx),
      this.deps.mode.hears ? (text) => this.spokenTurn(text) : undefined,
    );
  }

  /**
   * A spoken turn LiveKit committed. When all the step does with it is answer it under the instructions it
   * already has (an opentalk turn, a burst round, a timer still running) and nothing of ours is under way,
   * LiveKit answers it itself: its preemptive generation started that very reply on the final transcript,
   * which the step engine's own `generateReply` would discard for a second model request. Any other turn
   * (one that changes step, evaluates a branch or ends) is the step engine's. Either way the engine hears
   * when the reply has played out (`livekitAnswering` for LiveKit's).
   */
  private spokenTurn(text: string): TurnAnswer {
    // held actions (a step the model completed in the reply still playing) are the engine's to carry out first
    if (this.running === 0 && this.afterReply.length === 0 && !this.ended) {
      const at = this.now();
      const r = engineStep(this.flow.config, this.state, { type: 'user_turn', at, text });
      if (r.actions.length === 1 && r.actions[0]!.type === 'generate_reply') {
        this.state = r.state;
        this.transcript.push({ role: 'user', content: text });
        this.deps.record({ role: 'user', content: text, stepId: this.state.stepId, timestamp: at });
        return 'livekit';
      }
    }
    void this.userTurn(text, { spoken: true }).catch((err: unknown) =>
      this.deps.log.error({ err: safeError(err) }, 'user turn failed'),
    );
    return 'engine';
  }

  /**
   * LiveKit answers a turn with this speech: once it has played out, the step engine hears that the agent
   * spoke, as after a reply of its own (`spoke`). The model may have completed the step in it (the
   * `complete_step` tool), and an end step it led to ends the conversation only then.
   */
  private livekitAnswering(speechId: string | undefined): void {
    const speech = speechId === undefined ? undefined : this.speeches.get(speechId);
    if (!speech) return;
    void speech
      .waitForPlayout()
      .then(() => this.serialized(() => this.handle({ type: 'assistant_turn', at: this.now(), text: '' })))
      .catch((err: unknown) => this.deps.log.error({ err: safeError(err) }, 'reply not taken into the flow'));
  }

  /** Starts the session: the start step speaks first. */
  async start(): Promise<TurnResult> {
    const { mode } = this.deps;
    if (!mode.tapsAfterStart) this.replyTap.attach(this.deps.session);
    await this.deps.startSession(this.agent);
    // LiveKit puts its own transcription output in place at start: the tap goes in front of it
    if (mode.tapsAfterStart) this.replyTap.attach(this.deps.session);
    // what the caller heard of each segment (a room's output is in place only now)
    this.deps.session.output.audio?.on(
      voice.AudioOutput.EVENT_PLAYBACK_FINISHED,
      (ev: voice.PlaybackFinishedEvent) => (this.lastPlayback = ev),
    );
    const greet = () => this.serialized(() => this.handle({ type: 'session_started', at: this.now() }));
    if (mode.greetsInBackground) {
      // the greeting plays out while the user joins: returning now lets the token (or socket) be handed over
      void greet().catch((err: unknown) => this.deps.log.error({ err: safeError(err) }, 'greeting failed'));
      return this.result();
    }
    return greet();
  }

  /**
   * A user turn. `spoken`: a voice turn the framework committed, whose final transcript was an event already
   * (user_input_transcribed); LiveKit leaves a turn it was told not to answer (StopResponse) out of the
   * model's context, so like a text turn it goes in with the reply that answers it.
   */
  async userTurn(text: string, opts: { spoken?: boolean } = {}): Promise<TurnResult> {
    return this.serialized(async () => {
      if (this.ended) return this.result();
      this.transcript.push({ role: 'user', content: text });
      this.deps.record({ role: 'user', content: text, stepId: this.state.stepId, timestamp: this.now() });
      if (!opts.spoken) this.deps.emit({ type: 'user_turn', text, final: true, stepId: this.state.stepId });
      return this.handle({ type: 'user_turn', at: this.now(), text }, text);
    });
  }

  /** The structured output of the end step's post-processing, once it is done; null without one. */
  async structuredOutput(): Promise<Record<string, unknown> | null> {
    return (await this.postProcessing) ?? null;
  }

  /** Idempotent. Waits (bounded by its own timeouts) for post-processing already under way. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.deps.session
      .close()
      .catch((err: unknown) =>
        this.deps.log.warn(
          { code: 'AGENT_SESSION_CLOSE_FAILED', err: safeError(err) },
          'agent session close failed',
        ),
      );
    await this.postProcessing;
    await Promise.all(this.flows.map((f) => f.close()));
    this.notifyEnded();
  }

  private notifyEnded(): void {
    if (this.endedNotified) return;
    this.endedNotified = true;
    this.deps.onEnded?.();
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    this.running++;
    const run = this.queue.then(fn, fn).finally(() => this.running--);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private result(): TurnResult {
    const current = this.flow.config.steps[this.state.stepId];
    const metrics = this.collecting?.metrics;
    const failure = this.collecting?.failure;
    return {
      replies: this.collecting?.replies ?? [],
      stepId: this.state.stepId,
      stepType: current?.kind ?? 'start',
      stepChanges: this.collecting?.stepChanges ?? [],
      ended: this.ended,
      lastEventId: this.deps.lastEventId(),
      ...(metrics ? { metrics } : {}),
      ...(failure ? { error: failure } : {}),
    };
  }

  private feed(event: EngineEvent): EngineAction[] {
    const r = engineStep(this.flow.config, this.state, event);
    this.state = r.state;
    // every reply ends with `assistant_turn` (the engine's own, and one LiveKit answered): what the reply's step
    // completion left for after it goes first, in the same pass. A user turn can come first (a barge-in on a
    // reply LiveKit answered, whose playout is heard of later): the held actions then go before its answer
    const ends = event.type === 'assistant_turn' || event.type === 'user_turn';
    if (!ends || this.afterReply.length === 0) return r.actions;
    return [...this.afterReply.splice(0), ...r.actions];
  }

  private async handle(event: EngineEvent, pendingUser?: string): Promise<TurnResult> {
    const turn = { replies: [], stepChanges: [], clock: new TurnClock(this.now()), messages: [] };
    this.collecting = turn;
    try {
      const endRequested = await this.apply(this.feed(event), pendingUser);
      // the turn's messages are on the transcript before the owner hears of the end (it closes the record)
      this.endTurn(turn);
      // notified after the turn: the owner's close() must not cut post-processing off
      if (endRequested) this.notifyEnded();
      return this.result();
    } finally {
      this.collecting = undefined;
    }
  }

  /** A text turn's figures: on its last agent message and in an event; its messages go to the transcript. */
  private endTurn(turn: NonNullable<FlowConversation['collecting']>): void {
    if (this.deps.mode.records === 'when-said') return;
    turn.metrics = turn.clock.figures(this.now());
    const last = turn.messages.at(-1);
    if (last) {
      last.metrics = turn.metrics;
      this.deps.emit({ type: 'turn_metrics', stepId: last.stepId, metrics: turn.metrics });
    }
    for (const m of turn.messages) this.deps.record(m);
  }

  /** Carries out actions in order; actions an action leads to (a decision, a finished utterance) follow it. */
  /** Whether an end step was reached. */
  private async apply(initial: EngineAction[], pendingUser: string | undefined): Promise<boolean> {
    const pass: Pass = { queue: [...initial], userInput: pendingUser, endRequested: false };
    while (pass.queue.length > 0 && !this.closed) {
      const action = pass.queue.shift()!;
      await (this.act[action.type] as (a: EngineAction, p: Pass) => Promise<void> | void)(action, pass);
    }
    // a turn that produced no speech (e.g. during an evaluation) still belongs in the model's context
    await this.addPendingUser(pass);
    return pass.endRequested;
  }

  private readonly act: ActionHandlers = {
    step_changed: (a) => this.stepChanged({ stepId: a.stepId, stepType: a.stepType }),
    set_instructions: async (a) => {
      await this.agent.updateInstructions(a.instructions || ' ');
      await this.agent.updateTools([
        ...this.flow.tools,
        ...(a.completionTool ? [this.completionTool()] : []),
      ]);
    },
    speak: async (a, pass) => {
      if (a.literal) {
        await this.addPendingUser(pass);
        await this.deps.session.say(a.text).waitForPlayout();
      } else {
        await this.deps.session
          .generateReply({ userInput: pass.userInput, instructions: a.instruction })
          .waitForPlayout();
      }
      this.spoke(pass);
    },
    generate_reply: async (_a, pass) => {
      const input = pass.userInput;
      await this.deps.session.generateReply(input !== undefined ? { userInput: input } : {}).waitForPlayout();
      this.spoke(pass);
    },
    evaluate_branch: async (a, pass) => {
      const step = this.flow.config.steps[a.stepId];
      const own = isBranch(step) ? step.llm : undefined;
      const model = this.flow.llm(own ?? this.flow.config.providers.llm);
      const exit = await evaluateBranch(model, this.transcript, a, this.deps.branchTimeoutMs);
      this.deps.log.info({ stepId: a.stepId, exit, attempt: a.attempt }, 'branch evaluated');
      this.deps.emit({ type: 'branch_decided', stepId: a.stepId, exit: String(exit), attempt: a.attempt });
      pass.queue.push(...this.feed({ type: 'branch_decided', at: this.now(), stepId: a.stepId, exit }));
    },
    schedule_timer: (a) => {
      const t = setTimeout(
        () => {
          this.timers.delete(t);
          void this.serialized(async () =>
            this.feed({ type: 'timer_elapsed', at: this.now(), stepId: a.stepId }),
          );
        },
        Math.max(0, a.dueAt - this.now()),
      );
      t.unref();
      this.timers.add(t);
    },
    transfer: async (a, pass) => {
      const target = await this.deps.loadTransferTarget(a.targetAgentId);
      if (!target.ok) {
        this.deps.log.warn(
          { code: 'TRANSFER_FAILED', targetAgentId: a.targetAgentId, reason: target.reason },
          'transfer failed',
        );
        this.deps.emit({
          type: 'transfer',
          targetAgentId: a.targetAgentId,
          ok: false,
          reason: target.reason,
        });
        pass.queue.push(
          ...this.feed({ type: 'transfer_failed', at: this.now(), stepId: a.stepId, reason: target.reason }),
        );
        return;
      }
      await this.handOver(target.flow);
      this.deps.log.info({ targetAgentId: a.targetAgentId }, 'transferred');
      this.deps.emit({ type: 'transfer', targetAgentId: a.targetAgentId, ok: true });
      pass.queue.push(...this.feed({ type: 'session_started', at: this.now() }));
    },
    transfer_to_number: async (a, pass) => {
      const outcome: NumberTransfer = this.deps.transferToNumber
        ? await this.deps.transferToNumber(a.targetNumber)
        : { ok: false, reason: 'unavailable' };
      if (!outcome.ok) {
        this.deps.log.warn(
          { code: 'TRANSFER_FAILED', reason: outcome.reason },
          'transfer to a number failed',
        );
        this.deps.emit({ type: 'transfer', targetNumber: a.targetNumber, ok: false, reason: outcome.reason });
        pass.queue.push(
          ...this.feed({ type: 'transfer_failed', at: this.now(), stepId: a.stepId, reason: outcome.reason }),
        );
        return;
      }
      // the call is with the person now: the transport ends the session (`transferred`); nothing more is said
      this.deps.log.info({}, 'transferred to a number');
      this.deps.emit({ type: 'transfer', targetNumber: a.targetNumber, ok: true });
    },
    end_session: (a, pass) => {
      this.deps.log.info({ reason: a.reason }, 'conversation ended');
      pass.endRequested = true;
    },
    run_post_processing: (a) => {
      this.postProcessing = this.deps.postProcess(a.steps, [...this.transcript], this.flow);
    },
  };

  /** The target flow's agent takes over with its own models, carrying the conversation so far. */
  private async handOver(flow: FlowRuntime): Promise<void> {
    this.flows.push(flow);
    const agent = this.makeAgent(flow, this.agent.chatCtx.copy());
    this.deps.session.updateAgent(agent);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      agent.entered,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error('the transfer target did not take over')),
          HANDOFF_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
    this.agent = agent;
    this.flow = flow;
    this.state = initialState(flow.config);
    // what the source flow's steps held for after a reply is not the target's to carry out
    this.afterReply.length = 0;
  }

  private stepChanged(change: StepChange): void {
    this.collecting?.stepChanges.push(change);
    this.deps.onStepChange?.(change);
    this.deps.emit({ type: 'step_entered', stepId: change.stepId, stepType: change.stepType });
  }

  /** The agent has spoken: its utterance took the pending user turn along, and the engine may move on. */
  private spoke(pass: Pass): void {
    pass.userInput = undefined;
    pass.queue.push(...this.feed({ type: 'assistant_turn', at: this.now(), text: '' }));
  }

  private async addPendingUser(pass: Pass): Promise<void> {
    const text = pass.userInput;
    if (text === undefined) return;
    pass.userInput = undefined;
    const ctx = this.agent.chatCtx.copy();
    ctx.addMessage({ role: 'user', content: text });
    await this.agent.updateChatCtx(ctx);
  }

  private completionTool() {
    return llm.tool({
      name: COMPLETE_STEP_TOOL,
      description: 'Call this when the goal of the current part of the conversation has been reached.',
      execute: async () => {
        // runs inside the LLM's reply, which goes on after it with the context it started with (LiveKit copies
        // it): the step changes now; its instructions and tools, and what it does next, wait for the reply's
        // end (`afterReply`, run with the `assistant_turn` every reply ends with). Nothing here awaits: an
        // interrupted reply can end while its tool still runs
        const actions = this.feed({
          type: 'tool_called',
          at: this.now(),
          name: COMPLETE_STEP_TOOL,
          stepId: this.state.stepId,
        });
        for (const a of actions) {
          if (a.type === 'step_changed') this.stepChanged({ stepId: a.stepId, stepType: a.stepType });
          // the speech the step opens with (an end step's goodbye) is not said after the reply: the rest of
          // this reply says it (the tool's answer below)
          else if (a.type !== 'speak') this.afterReply.push(a);
        }
        return completionAnswer(actions);
      },
    });
  }
}

/**
 * What `complete_step` answers the model. The rest of the reply it was called in is generated with the context
 * that reply started with (LiveKit copies it), so what the new step asks of that reply reaches the model only
 * here; the answer stays in the context, so it speaks of this reply only.
 */
export function completionAnswer(actions: readonly EngineAction[]): string {
  if (actions.length === 0) return 'There is no step to complete here: carry on.';
  const goodbye = actions.find((a) => a.type === 'speak');
  if (goodbye)
    return goodbye.literal
      ? `Step complete. End the conversation with the rest of this reply, saying exactly: "${goodbye.text}"`
      : `Step complete. End the conversation with the rest of this reply: ${goodbye.instruction}`;
  if (actions.some((a) => a.type === 'transfer'))
    return 'Step complete. The caller is handed over to another agent once you finish this reply: keep it short.';
  const instructions = actions.find((a) => a.type === 'set_instructions')?.instructions;
  if (instructions)
    return `Step complete. For the rest of this reply, follow these instructions:\n\n${instructions}`;
  return 'Step complete.';
}
