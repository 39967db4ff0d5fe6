import type { CompiledFlow, PostStep, Step, StepKind } from './types.js';

/**
 * The step engine: pure logic, no I/O, no clock. A function of (compiled flow, state, event) that returns
 * the new state and the actions the runtime must carry out. The same events always give the same actions,
 * so it is tested exhaustively without a model, and the voice and text runtimes share it.
 */

/** Why a transfer's target cannot take over: not stored, archived, not runnable here, or not loaded. */
export type TransferFailureReason = 'missing' | 'archived' | 'invalid' | 'error';

export type EngineEvent =
  | { type: 'session_started'; at: number }
  | { type: 'user_turn'; at: number; text: string }
  | { type: 'assistant_turn'; at: number; text: string }
  | { type: 'timer_elapsed'; at: number; stepId: string }
  /** The answer to an `evaluate_branch`: the chosen exit index, `stay`, or `error` when the call failed. */
  | { type: 'branch_decided'; at: number; stepId: string; exit: number | 'stay' | 'error' }
  | { type: 'tool_called'; at: number; name: string; stepId: string }
  | {
      type: 'transfer_failed';
      at: number;
      stepId: string;
      reason: TransferFailureReason;
    };

export type EngineAction =
  | { type: 'step_changed'; stepId: string; stepType: StepKind }
  /** The system prompt for the current step; `completionTool` offers the LLM a tool to finish the step. */
  | { type: 'set_instructions'; instructions: string; completionTool: boolean }
  | { type: 'speak'; literal: true; text: string }
  | { type: 'speak'; literal: false; instruction: string }
  /** Let the LLM answer the user's last turn under the current instructions. */
  | { type: 'generate_reply' }
  | {
      type: 'evaluate_branch';
      stepId: string;
      kind: 'ifelse' | 'categorize';
      /** What to judge: the if/else condition, or the classification instruction. */
      question: string;
      /** Exit labels, by index: `['true', 'false']` or the categories. */
      exits: string[];
      /** Evaluated on an opentalk turn: "none yet" is a valid answer. */
      allowStay: boolean;
      attempt: number;
    }
  | { type: 'schedule_timer'; stepId: string; dueAt: number }
  | { type: 'transfer'; stepId: string; targetAgentId: string }
  | { type: 'end_session'; reason: 'completed' | 'transfer_failed' }
  | { type: 'run_post_processing'; steps: PostStep[] };

export interface EngineState {
  stepId: string;
  phase: 'idle' | 'active' | 'evaluating' | 'transferring' | 'closing' | 'ended';
  stepStartedAt: number;
  roundsDone: number;
  timerElapsed: boolean;
  /** The branch step being evaluated, and from where (opentalk may stay). */
  evaluating?: { stepId: string; fromOpentalk: boolean; attempt: number } | undefined;
  /** The end step whose post-processing runs once the goodbye has been spoken. */
  closingStepId?: string | undefined;
}

export interface EngineResult {
  state: EngineState;
  actions: EngineAction[];
}

export const COMPLETE_STEP_TOOL = 'complete_step';
/** After this many failed evaluations of an entered branch, the default exit is taken. */
export const MAX_BRANCH_ATTEMPTS = 2;
export const TRANSFER_FAILED_INSTRUCTION =
  'Apologize briefly: the handover to a colleague is not possible right now. Then say goodbye.';
const DEFAULT_GOODBYE = 'Thank the user and say goodbye.';

export function initialState(flow: CompiledFlow): EngineState {
  return { stepId: flow.startStepId, phase: 'idle', stepStartedAt: 0, roundsDone: 0, timerElapsed: false };
}

export function instructionsFor(flow: CompiledFlow, step: Step): string {
  const command = 'command' in step ? step.command : '';
  return [flow.agent.instructions, command].filter((s) => s.trim() !== '').join('\n\n');
}

/** The exit a branch takes when its evaluation keeps failing: `false`, or the last category (often "other"). */
export function defaultExit(step: Extract<Step, { kind: 'ifelse' | 'categorize' }>): number {
  return step.kind === 'ifelse' ? 1 : step.exits.length - 1;
}

function exitsOf(step: Extract<Step, { kind: 'ifelse' | 'categorize' }>): {
  labels: string[];
  targets: string[];
} {
  return step.kind === 'ifelse'
    ? { labels: ['true', 'false'], targets: [step.exits.true, step.exits.false] }
    : { labels: step.categories, targets: step.exits };
}

function evaluateAction(
  step: Extract<Step, { kind: 'ifelse' | 'categorize' }>,
  fromOpentalk: boolean,
  attempt: number,
): EngineAction {
  return {
    type: 'evaluate_branch',
    stepId: step.id,
    kind: step.kind,
    question: step.kind === 'ifelse' ? step.conditionText : step.command,
    exits: exitsOf(step).labels,
    allowStay: fromOpentalk,
    attempt,
  };
}

function speakAction(literal: boolean, text: string): EngineAction {
  return literal
    ? { type: 'speak', literal: true, text }
    : { type: 'speak', literal: false, instruction: text };
}

/**
 * Makes `stepId` current. `reply`: whether the agent should answer the user's turn that led here (true when a
 * user turn or a branch decision moved the run; false when the LLM's own tool call did, mid-reply).
 */
function enter(
  flow: CompiledFlow,
  state: EngineState,
  stepId: string,
  at: number,
  reply: boolean,
): EngineResult {
  const step = flow.steps[stepId];
  if (!step) throw new Error(`step ${stepId} is not in the compiled flow`);
  const next: EngineState = {
    ...state,
    stepId,
    phase: 'active',
    stepStartedAt: at,
    roundsDone: 0,
    timerElapsed: false,
    evaluating: undefined,
  };
  const actions: EngineAction[] = [{ type: 'step_changed', stepId, stepType: step.kind }];
  switch (step.kind) {
    case 'start':
    case 'burst':
    case 'opentalk':
    case 'timer': {
      const completionTool = step.kind === 'opentalk' && !isBranch(flow, step.next);
      actions.push({ type: 'set_instructions', instructions: instructionsFor(flow, step), completionTool });
      if (step.kind === 'timer')
        actions.push({ type: 'schedule_timer', stepId, dueAt: at + step.durationMs });
      if (step.kind === 'start') actions.push(speakAction(step.isLiteral, step.command));
      else if (reply) actions.push({ type: 'generate_reply' });
      return { state: next, actions };
    }
    case 'ifelse':
    case 'categorize':
      next.phase = 'evaluating';
      next.evaluating = { stepId, fromOpentalk: false, attempt: 1 };
      actions.push(evaluateAction(step, false, 1));
      return { state: next, actions };
    case 'transfer':
      next.phase = 'transferring';
      actions.push({ type: 'transfer', stepId, targetAgentId: step.targetAgentId });
      return { state: next, actions };
    case 'end':
      next.phase = 'closing';
      next.closingStepId = stepId;
      actions.push({
        type: 'set_instructions',
        instructions: instructionsFor(flow, step),
        completionTool: false,
      });
      actions.push(speakAction(step.isLiteral, step.command || DEFAULT_GOODBYE));
      return { state: next, actions };
  }
}

function isBranch(flow: CompiledFlow, stepId: string): boolean {
  const k = flow.steps[stepId]?.kind;
  return k === 'ifelse' || k === 'categorize';
}

const none = (state: EngineState): EngineResult => ({ state, actions: [] });

export function step(flow: CompiledFlow, state: EngineState, event: EngineEvent): EngineResult {
  if (state.phase === 'ended') return none(state);
  const current = flow.steps[state.stepId];
  if (!current) throw new Error(`step ${state.stepId} is not in the compiled flow`);

  switch (event.type) {
    case 'session_started':
      if (state.phase !== 'idle') return none(state);
      return enter(flow, state, flow.startStepId, event.at, false);

    case 'user_turn': {
      if (state.phase !== 'active') return none(state); // evaluating, transferring, closing: the turn is only recorded
      switch (current.kind) {
        case 'start':
          return enter(flow, state, current.next, event.at, true);
        case 'burst': {
          const roundsDone = state.roundsDone + 1;
          if (roundsDone >= current.rounds) return enter(flow, state, current.next, event.at, true);
          return { state: { ...state, roundsDone }, actions: [{ type: 'generate_reply' }] };
        }
        case 'timer':
          if (state.timerElapsed || event.at - state.stepStartedAt >= current.durationMs) {
            return enter(flow, state, current.next, event.at, true);
          }
          return { state, actions: [{ type: 'generate_reply' }] };
        case 'opentalk': {
          const nextStep = flow.steps[current.next];
          if (nextStep && (nextStep.kind === 'ifelse' || nextStep.kind === 'categorize')) {
            return {
              state: {
                ...state,
                phase: 'evaluating',
                evaluating: { stepId: nextStep.id, fromOpentalk: true, attempt: 1 },
              },
              actions: [evaluateAction(nextStep, true, 1)],
            };
          }
          return { state, actions: [{ type: 'generate_reply' }] };
        }
        default:
          return none(state);
      }
    }

    case 'assistant_turn':
      if (state.phase === 'closing') {
        const end = flow.steps[state.closingStepId ?? ''];
        const actions: EngineAction[] = [
          { type: 'end_session', reason: end ? 'completed' : 'transfer_failed' },
        ];
        if (end?.kind === 'end' && end.post.length > 0)
          actions.push({ type: 'run_post_processing', steps: end.post });
        return { state: { ...state, phase: 'ended' }, actions };
      }
      return none(state);

    case 'timer_elapsed':
      // Never cuts the agent off: the step moves on the first user turn after this.
      if (current.kind === 'timer' && event.stepId === current.id && state.phase === 'active') {
        return none({ ...state, timerElapsed: true });
      }
      return none(state);

    case 'branch_decided': {
      const ev = state.evaluating;
      if (state.phase !== 'evaluating' || !ev || ev.stepId !== event.stepId) return none(state); // stale answer
      const branch = flow.steps[ev.stepId];
      if (!branch || (branch.kind !== 'ifelse' && branch.kind !== 'categorize')) return none(state);
      const { targets } = exitsOf(branch);
      const chosen =
        typeof event.exit === 'number' && Number.isInteger(event.exit) ? targets[event.exit] : undefined;
      if (chosen) {
        if (ev.fromOpentalk) {
          // pass through the branch (so the builder sees it light up), then into the chosen exit
          const through = enter(flow, { ...state, stepId: branch.id }, chosen, event.at, true);
          return {
            state: through.state,
            actions: [{ type: 'step_changed', stepId: branch.id, stepType: branch.kind }, ...through.actions],
          };
        }
        return enter(flow, state, chosen, event.at, true);
      }
      if (ev.fromOpentalk) {
        // "stay", a failed call or an unknown exit: keep talking; the next user turn asks again
        return {
          state: { ...state, phase: 'active', evaluating: undefined },
          actions: [{ type: 'generate_reply' }],
        };
      }
      if (ev.attempt < MAX_BRANCH_ATTEMPTS) {
        const attempt = ev.attempt + 1;
        return {
          state: { ...state, evaluating: { ...ev, attempt } },
          actions: [evaluateAction(branch, false, attempt)],
        };
      }
      return enter(flow, state, targets[defaultExit(branch)]!, event.at, true);
    }

    case 'tool_called':
      if (
        event.name === COMPLETE_STEP_TOOL &&
        current.kind === 'opentalk' &&
        event.stepId === current.id &&
        state.phase === 'active' &&
        !isBranch(flow, current.next)
      ) {
        return enter(flow, state, current.next, event.at, false);
      }
      return none(state);

    case 'transfer_failed':
      if (state.phase !== 'transferring' || event.stepId !== current.id) return none(state);
      return {
        state: { ...state, phase: 'closing', closingStepId: undefined },
        actions: [{ type: 'speak', literal: false, instruction: TRANSFER_FAILED_INSTRUCTION }],
      };
  }
}
