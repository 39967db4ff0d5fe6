import { isBranch } from './node-types.js';
import type { BranchStep, CompiledFlow, PostStep, Step, StepKind } from './types.js';

/**
 * The step engine: pure logic, no I/O, no clock. A function of (compiled flow, state, event) that returns
 * the new state and the actions the runtime must carry out. The same events always give the same actions,
 * so it is tested exhaustively without a model, and the voice and text runtimes share it.
 */

/**
 * Why a transfer's target cannot take over: not stored, archived, not runnable here, or not loaded; for a phone
 * number, `unavailable` (the call is not a phone call, or the operator set no Twilio account) or `error` (the
 * hand-over failed).
 */
export type TransferFailureReason = 'missing' | 'archived' | 'invalid' | 'unavailable' | 'error';

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
  /** Hand the phone call to a person at this number (E.164); the call ends `transferred` once it is. */
  | { type: 'transfer_to_number'; stepId: string; targetNumber: string }
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

function instructionsFor(flow: CompiledFlow, step: Step): string {
  const command = 'command' in step ? step.command : '';
  return [flow.agent.instructions, command].filter((s) => s.trim() !== '').join('\n\n');
}

/** The exit a branch takes when its evaluation keeps failing: `false`, or the last category (often "other"). */
function defaultExit(step: BranchStep): number {
  return step.kind === 'ifelse' ? 1 : step.exits.length - 1;
}

function exitsOf(step: BranchStep): {
  labels: string[];
  targets: string[];
} {
  return step.kind === 'ifelse'
    ? { labels: ['true', 'false'], targets: [step.exits.true, step.exits.false] }
    : { labels: step.categories, targets: step.exits };
}

function evaluateAction(step: BranchStep, fromOpentalk: boolean, attempt: number): EngineAction {
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
      const completionTool = step.kind === 'opentalk' && !isBranch(flow.steps[step.next]?.kind);
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
      actions.push(
        step.targetNumber !== undefined
          ? { type: 'transfer_to_number', stepId, targetNumber: step.targetNumber }
          : { type: 'transfer', stepId, targetAgentId: step.targetAgentId },
      );
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

const none = (state: EngineState): EngineResult => ({ state, actions: [] });

type Handler<E extends EngineEvent['type']> = (
  flow: CompiledFlow,
  state: EngineState,
  current: Step,
  event: Extract<EngineEvent, { type: E }>,
) => EngineResult;

/** A user turn in an active step, by the step's kind. */
const USER_TURN: Partial<Record<StepKind, Handler<'user_turn'>>> = {
  start: (flow, state, current, event) =>
    enter(flow, state, (current as { next: string }).next, event.at, true),
  burst: (flow, state, current, event) => {
    const step = current as Extract<Step, { kind: 'burst' }>;
    const roundsDone = state.roundsDone + 1;
    if (roundsDone >= step.rounds) return enter(flow, state, step.next, event.at, true);
    return { state: { ...state, roundsDone }, actions: [{ type: 'generate_reply' }] };
  },
  timer: (flow, state, current, event) => {
    const step = current as Extract<Step, { kind: 'timer' }>;
    if (state.timerElapsed || event.at - state.stepStartedAt >= step.durationMs) {
      return enter(flow, state, step.next, event.at, true);
    }
    return { state, actions: [{ type: 'generate_reply' }] };
  },
  opentalk: (flow, state, current) => {
    const nextStep = flow.steps[(current as { next: string }).next];
    if (isBranch(nextStep)) {
      const evaluating = { stepId: nextStep.id, fromOpentalk: true, attempt: 1 };
      return {
        state: { ...state, phase: 'evaluating', evaluating },
        actions: [evaluateAction(nextStep, true, 1)],
      };
    }
    return { state, actions: [{ type: 'generate_reply' }] };
  },
};

/** The answer to a branch evaluation: the chosen exit, or staying, retrying, or the default exit. */
const onBranchDecided: Handler<'branch_decided'> = (flow, state, _current, event) => {
  const ev = state.evaluating;
  if (state.phase !== 'evaluating' || !ev || ev.stepId !== event.stepId) return none(state); // stale answer
  const b = flow.steps[ev.stepId];
  if (!isBranch(b)) return none(state);
  const { targets } = exitsOf(b);
  const chosen =
    typeof event.exit === 'number' && Number.isInteger(event.exit) ? targets[event.exit] : undefined;
  if (chosen && ev.fromOpentalk) {
    // pass through the branch (so the builder sees it light up), then into the chosen exit
    const through = enter(flow, { ...state, stepId: b.id }, chosen, event.at, true);
    return {
      state: through.state,
      actions: [{ type: 'step_changed', stepId: b.id, stepType: b.kind }, ...through.actions],
    };
  }
  if (chosen) return enter(flow, state, chosen, event.at, true);
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
      actions: [evaluateAction(b, false, attempt)],
    };
  }
  return enter(flow, state, targets[defaultExit(b)]!, event.at, true);
};

/** Each event: what it does in the current state. */
const ON: { [E in EngineEvent['type']]: Handler<E> } = {
  session_started: (flow, state, _current, event) =>
    state.phase !== 'idle' ? none(state) : enter(flow, state, flow.startStepId, event.at, false),
  // evaluating, transferring, closing: the turn is only recorded
  user_turn: (flow, state, current, event) =>
    state.phase !== 'active'
      ? none(state)
      : (USER_TURN[current.kind]?.(flow, state, current, event) ?? none(state)),
  assistant_turn: (flow, state) => {
    if (state.phase !== 'closing') return none(state);
    const end = flow.steps[state.closingStepId ?? ''];
    const actions: EngineAction[] = [{ type: 'end_session', reason: end ? 'completed' : 'transfer_failed' }];
    if (end?.kind === 'end' && end.post.length > 0)
      actions.push({ type: 'run_post_processing', steps: end.post });
    return { state: { ...state, phase: 'ended' }, actions };
  },
  // never cuts the agent off: the step moves on at the first user turn after this
  timer_elapsed: (_flow, state, current, event) =>
    current.kind === 'timer' && event.stepId === current.id && state.phase === 'active'
      ? none({ ...state, timerElapsed: true })
      : none(state),
  branch_decided: onBranchDecided,
  tool_called: (flow, state, current, event) => {
    const completes =
      event.name === COMPLETE_STEP_TOOL &&
      current.kind === 'opentalk' &&
      event.stepId === current.id &&
      state.phase === 'active' &&
      !isBranch(flow.steps[current.next]?.kind);
    return completes ? enter(flow, state, current.next, event.at, false) : none(state);
  },
  transfer_failed: (_flow, state, current, event) => {
    if (state.phase !== 'transferring' || event.stepId !== current.id) return none(state);
    return {
      state: { ...state, phase: 'closing', closingStepId: undefined },
      actions: [{ type: 'speak', literal: false, instruction: TRANSFER_FAILED_INSTRUCTION }],
    };
  },
};

export function step(flow: CompiledFlow, state: EngineState, event: EngineEvent): EngineResult {
  if (state.phase === 'ended') return none(state);
  const current = flow.steps[state.stepId];
  if (!current) throw new Error(`step ${state.stepId} is not in the compiled flow`);
  return (ON[event.type] as Handler<EngineEvent['type']>)(flow, state, current, event);
}
