import { llm, voice } from '@livekit/agents';
import type { MessageRole } from '@vab/contracts';
import {
  COMPLETE_STEP_TOOL,
  initialState,
  step as engineStep,
  type CompiledFlow,
  type EngineAction,
  type EngineEvent,
  type EngineState,
  type LlmConfig,
  type PostStep,
  type StepKind,
} from '@vab/flow';
import type { Logger } from 'pino';
import { evaluateBranch, extractStructuredOutput, type Turn } from './judge.js';

export interface StepChange {
  stepId: string;
  stepType: StepKind;
}

export interface TurnResult {
  replies: string[];
  stepId: string;
  stepType: StepKind;
  stepChanges: StepChange[];
  ended: boolean;
}

export interface RecordedMessage {
  role: MessageRole;
  content: string;
  stepId: string;
  timestamp: number;
}

export type TransferTarget =
  { ok: true; flow: CompiledFlow } | { ok: false; reason: 'missing' | 'archived' | 'invalid' | 'error' };

export interface ConversationDeps {
  flow: CompiledFlow;
  makeLlm(cfg: LlmConfig): llm.LLM;
  /** Loads and compiles another stored agent's flow for a transfer step. */
  loadTransferTarget(agentId: string): Promise<TransferTarget>;
  /** Every transcript message, with the step that was current. Must not throw. */
  record(message: RecordedMessage): void;
  onStepChange?(change: StepChange): void;
  /** The session has ended (goodbye said, or a failed transfer). Called once. */
  onEnded?(): void;
  log: Logger;
  now?: () => number;
  branchTimeoutMs?: number;
  webhookTimeoutMs?: number;
  /**
   * Voice: the caller's session (with STT, TTS and a room) and agent. Without it the conversation runs text
   * only, with a session of its own and manual turns.
   */
  voice?: { session: voice.AgentSession; agent: voice.Agent; start(): Promise<void> } | undefined;
}

/**
 * One conversation with a flow: the pure step engine decides, this class carries its actions out on a
 * LiveKit `voice.AgentSession` (instructions and tools per step, literal or generated speech, branch
 * evaluation and post-processing as structured LLM calls). User turns are taken one at a time.
 */
export class FlowConversation {
  private flow: CompiledFlow;
  private state: EngineState;
  private readonly agent: voice.Agent;
  private readonly session: voice.AgentSession;
  private readonly agentLlm: llm.LLM;
  private readonly transcript: Turn[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private queue: Promise<unknown> = Promise.resolve();
  private collecting: { replies: string[]; stepChanges: StepChange[] } | undefined;
  private closed = false;
  private endedNotified = false;
  private postProcessing: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly deps: ConversationDeps) {
    this.flow = deps.flow;
    this.state = initialState(deps.flow);
    this.now = deps.now ?? Date.now;
    this.agentLlm = deps.makeLlm(deps.flow.providers.llm);
    this.agent = deps.voice?.agent ?? new voice.Agent({ instructions: deps.flow.agent.instructions || ' ' });
    this.session =
      deps.voice?.session ??
      new voice.AgentSession({ llm: this.agentLlm, turnHandling: { turnDetection: 'manual' } });
    this.session.on(voice.AgentSessionEventTypes.ConversationItemAdded, (ev) => {
      const item = ev.item;
      if (item.type !== 'message' || item.role !== 'assistant') return;
      const text = item.textContent ?? '';
      if (text === '') return;
      this.transcript.push({ role: 'assistant', content: text });
      this.collecting?.replies.push(text);
      this.deps.record({
        role: 'assistant',
        content: text,
        stepId: this.state.stepId,
        timestamp: this.now(),
      });
    });
  }

  get ended(): boolean {
    return this.state.phase === 'ended' || this.closed;
  }

  /** Starts the session: the start step speaks first. */
  async start(): Promise<TurnResult> {
    if (this.deps.voice) {
      await this.deps.voice.start();
      // in a room the greeting plays out while the user joins: returning now lets the token be handed over
      void this.serialized(() => this.handle({ type: 'session_started', at: this.now() })).catch(
        (err: unknown) => this.deps.log.error({ err: String(err) }, 'greeting failed'),
      );
      return this.result();
    }
    await this.session.start({ agent: this.agent });
    return this.serialized(() => this.handle({ type: 'session_started', at: this.now() }));
  }

  /**
   * A user turn. `inContext`: the session already added the message to the model's context (a voice turn
   * committed by the framework); a text turn is added here, with the reply that answers it.
   */
  async userTurn(text: string, opts: { inContext?: boolean } = {}): Promise<TurnResult> {
    return this.serialized(async () => {
      if (this.ended) return this.result();
      this.transcript.push({ role: 'user', content: text });
      this.deps.record({ role: 'user', content: text, stepId: this.state.stepId, timestamp: this.now() });
      return this.handle({ type: 'user_turn', at: this.now(), text }, opts.inContext ? undefined : text);
    });
  }

  /** Idempotent. Waits (bounded by its own timeouts) for post-processing already under way. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.session
      .close()
      .catch((err: unknown) => this.deps.log.warn({ err: String(err) }, 'agent session close failed'));
    await this.postProcessing;
    this.notifyEnded();
  }

  private notifyEnded(): void {
    if (this.endedNotified) return;
    this.endedNotified = true;
    this.deps.onEnded?.();
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private result(): TurnResult {
    const current = this.flow.steps[this.state.stepId];
    return {
      replies: this.collecting?.replies ?? [],
      stepId: this.state.stepId,
      stepType: current?.kind ?? 'start',
      stepChanges: this.collecting?.stepChanges ?? [],
      ended: this.ended,
    };
  }

  private feed(event: EngineEvent): EngineAction[] {
    const r = engineStep(this.flow, this.state, event);
    this.state = r.state;
    return r.actions;
  }

  private async handle(event: EngineEvent, pendingUser?: string): Promise<TurnResult> {
    this.collecting = { replies: [], stepChanges: [] };
    try {
      await this.apply(this.feed(event), pendingUser);
      return this.result();
    } finally {
      this.collecting = undefined;
    }
  }

  /** Carries out actions in order; actions an action leads to (a decision, a finished utterance) follow it. */
  private async apply(initial: EngineAction[], pendingUser: string | undefined): Promise<void> {
    const queue = [...initial];
    let userInput = pendingUser;
    let endRequested = false;
    const spoke = () => {
      userInput = undefined;
      queue.push(...this.feed({ type: 'assistant_turn', at: this.now(), text: '' }));
    };
    while (queue.length > 0 && !this.closed) {
      const action = queue.shift()!;
      switch (action.type) {
        case 'step_changed': {
          const change = { stepId: action.stepId, stepType: action.stepType };
          this.collecting?.stepChanges.push(change);
          this.deps.onStepChange?.(change);
          break;
        }
        case 'set_instructions':
          await this.agent.updateInstructions(action.instructions || ' ');
          await this.agent.updateTools(
            action.completionTool ? { [COMPLETE_STEP_TOOL]: this.completionTool() } : {},
          );
          break;
        case 'speak':
          if (action.literal) {
            await this.addPendingUser(userInput);
            await this.session.say(action.text).waitForPlayout();
          } else {
            await this.session
              .generateReply({ userInput, instructions: action.instruction })
              .waitForPlayout();
          }
          spoke();
          break;
        case 'generate_reply':
          await this.session.generateReply(userInput !== undefined ? { userInput } : {}).waitForPlayout();
          spoke();
          break;
        case 'evaluate_branch': {
          const step = this.flow.steps[action.stepId];
          const own = step && (step.kind === 'ifelse' || step.kind === 'categorize') ? step.llm : undefined;
          const model = own ? this.deps.makeLlm(own) : this.agentLlm;
          const exit = await evaluateBranch(
            model,
            this.transcript,
            action,
            this.deps.branchTimeoutMs ?? 15_000,
          );
          this.deps.log.info({ stepId: action.stepId, exit, attempt: action.attempt }, 'branch evaluated');
          queue.push(...this.feed({ type: 'branch_decided', at: this.now(), stepId: action.stepId, exit }));
          break;
        }
        case 'schedule_timer': {
          const t = setTimeout(
            () => {
              this.timers.delete(t);
              void this.serialized(async () =>
                this.feed({ type: 'timer_elapsed', at: this.now(), stepId: action.stepId }),
              );
            },
            Math.max(0, action.dueAt - this.now()),
          );
          t.unref();
          this.timers.add(t);
          break;
        }
        case 'transfer': {
          const target = await this.deps.loadTransferTarget(action.targetAgentId);
          if (target.ok) {
            this.deps.log.info({ targetAgentId: action.targetAgentId }, 'transferred');
            this.flow = target.flow;
            this.state = initialState(target.flow);
            await this.agent.updateInstructions(target.flow.agent.instructions || ' ');
            queue.push(...this.feed({ type: 'session_started', at: this.now() }));
          } else {
            this.deps.log.warn(
              { targetAgentId: action.targetAgentId, reason: target.reason },
              'transfer failed',
            );
            queue.push(
              ...this.feed({
                type: 'transfer_failed',
                at: this.now(),
                stepId: action.stepId,
                reason: target.reason,
              }),
            );
          }
          break;
        }
        case 'end_session':
          this.deps.log.info({ reason: action.reason }, 'conversation ended');
          endRequested = true; // notified after the loop: the owner's close() must not cut post-processing off
          break;
        case 'run_post_processing':
          this.postProcessing = this.runPostProcessing(action.steps);
          break;
      }
    }
    // a turn that produced no speech (e.g. during an evaluation) still belongs in the model's context
    await this.addPendingUser(userInput);
    if (endRequested) this.notifyEnded();
  }

  private async addPendingUser(text: string | undefined): Promise<void> {
    if (text === undefined) return;
    const ctx = this.agent.chatCtx.copy();
    ctx.addMessage({ role: 'user', content: text });
    await this.agent.updateChatCtx(ctx);
  }

  private completionTool() {
    return llm.tool({
      description: 'Call this when the goal of the current part of the conversation has been reached.',
      execute: async () => {
        // runs inside the LLM's reply: the step changes now, the model carries on under the new instructions
        const actions = this.feed({
          type: 'tool_called',
          at: this.now(),
          name: COMPLETE_STEP_TOOL,
          stepId: this.state.stepId,
        });
        for (const a of actions) {
          if (a.type === 'step_changed') {
            this.collecting?.stepChanges.push({ stepId: a.stepId, stepType: a.stepType });
            this.deps.onStepChange?.({ stepId: a.stepId, stepType: a.stepType });
          }
          if (a.type === 'set_instructions') await this.agent.updateInstructions(a.instructions || ' ');
        }
        return 'Step complete. Continue under the new instructions.';
      },
    });
  }

  /** Structured output, then webhooks with it. A failure is logged and never breaks the session. */
  private async runPostProcessing(steps: PostStep[]): Promise<void> {
    let structuredOutput: Record<string, unknown> | undefined;
    const conversation = [...this.transcript];
    for (const s of steps) {
      if (s.kind === 'structured_output') {
        try {
          const model = s.llm ? this.deps.makeLlm(s.llm) : this.agentLlm;
          structuredOutput = await extractStructuredOutput(
            model,
            conversation,
            s.command,
            s.schemaFields,
            this.deps.branchTimeoutMs ?? 15_000,
          );
          this.deps.log.info(
            { stepId: s.id, fields: Object.keys(structuredOutput) },
            'structured output extracted',
          );
        } catch (err) {
          this.deps.log.warn({ stepId: s.id, err: String(err) }, 'structured output failed');
        }
      } else {
        try {
          const res = await fetch(s.url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...s.headers },
            body: JSON.stringify(
              structuredOutput === undefined ? { conversation } : { conversation, structuredOutput },
            ),
            signal: AbortSignal.timeout(this.deps.webhookTimeoutMs ?? 5000),
          });
          this.deps.log.info({ stepId: s.id, status: res.status }, 'webhook delivered');
        } catch (err) {
          this.deps.log.warn({ stepId: s.id, err: String(err) }, 'webhook failed');
        }
      }
    }
  }
}
