import { describe, expect, it } from 'vitest';
import { compile } from './compiler.js';
import {
  COMPLETE_STEP_TOOL,
  initialState,
  MAX_BRANCH_ATTEMPTS,
  step,
  TRANSFER_FAILED_INSTRUCTION,
  type EngineAction,
  type EngineEvent,
  type EngineState,
} from './engine.js';
import { fullFlow, withEdge, withNode, withoutNode } from '@vab/testkit';
import type { CompiledFlow } from './types.js';
import type { Flow } from '@vab/contracts';

function compiled(flow: Flow = fullFlow()): CompiledFlow {
  const r = compile(flow);
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.config;
}

/** Folds events through the engine; returns the final state and the actions of each event. */
function run(flow: CompiledFlow, events: EngineEvent[], from?: EngineState) {
  let state = from ?? initialState(flow);
  const perEvent: EngineAction[][] = [];
  for (const ev of events) {
    const r = step(flow, state, ev);
    state = r.state;
    perEvent.push(r.actions);
  }
  return { state, perEvent, all: perEvent.flat() };
}

const user = (at: number, text = 'hi'): EngineEvent => ({ type: 'user_turn', at, text });
const said = (at: number): EngineEvent => ({ type: 'assistant_turn', at, text: '…' });
const decided = (at: number, stepId: string, exit: number | 'stay' | 'error'): EngineEvent => ({
  type: 'branch_decided',
  at,
  stepId,
  exit,
});
const steps = (actions: EngineAction[]) =>
  actions.filter((a) => a.type === 'step_changed').map((a) => (a as { stepId: string }).stepId);
const types = (actions: EngineAction[]) => actions.map((a) => a.type);

/** Reaches the opentalk step of the full flow: greeting, first user turn, two burst rounds. */
const toTalk: EngineEvent[] = [{ type: 'session_started', at: 0 }, user(1), user(2), user(3)];

describe('start', () => {
  it('speaks first, literally when isLiteral, under the agent instructions', () => {
    const flow = compiled();
    const { perEvent, state } = run(flow, [{ type: 'session_started', at: 0 }]);
    expect(perEvent[0]).toEqual([
      { type: 'step_changed', stepId: 'start', stepType: 'start' },
      {
        type: 'set_instructions',
        instructions: 'You book appointments.\n\nHello, this is the clinic.',
        completionTool: false,
      },
      { type: 'speak', literal: true, text: 'Hello, this is the clinic.' },
    ]);
    expect(state).toMatchObject({ stepId: 'start', phase: 'active' });
  });

  it('generates the greeting from the command when not literal', () => {
    const flow = compiled(withNode(fullFlow(), 'start', { isLiteral: false, command: 'Greet warmly.' }));
    expect(run(flow, [{ type: 'session_started', at: 0 }]).all).toContainEqual({
      type: 'speak',
      literal: false,
      instruction: 'Greet warmly.',
    });
  });

  it('advances on the first user turn and ignores a second session_started', () => {
    const flow = compiled();
    const r = run(flow, [{ type: 'session_started', at: 0 }, { type: 'session_started', at: 1 }, user(2)]);
    expect(r.perEvent[1]).toEqual([]);
    expect(r.perEvent[2]).toEqual([
      { type: 'step_changed', stepId: 'burst', stepType: 'burst' },
      {
        type: 'set_instructions',
        instructions: 'You book appointments.\n\nAsk for their name and date of birth.',
        completionTool: false,
      },
      { type: 'generate_reply' },
    ]);
  });
});

describe('burst', () => {
  it('completes a round per user turn and advances after `rounds` rounds', () => {
    const flow = compiled();
    const r = run(flow, [{ type: 'session_started', at: 0 }, user(1), user(2), user(3)]);
    expect(r.perEvent[2]).toEqual([{ type: 'generate_reply' }]);
    expect(steps(r.perEvent[3]!)).toEqual(['talk']);
    expect(r.state).toMatchObject({ stepId: 'talk', roundsDone: 0 });
  });

  it('with one round advances on the first turn', () => {
    const flow = compiled(withNode(fullFlow(), 'burst', { rounds: 1 }));
    expect(steps(run(flow, [{ type: 'session_started', at: 0 }, user(1), user(2)]).perEvent[2]!)).toEqual([
      'talk',
    ]);
  });
});

describe('opentalk followed by a branch', () => {
  it('evaluates the branch on every user turn, staying while it answers stay', () => {
    const flow = compiled();
    const r = run(flow, [...toTalk, user(4)]);
    expect(r.perEvent[4]).toEqual([
      {
        type: 'evaluate_branch',
        stepId: 'cat',
        kind: 'categorize',
        question: 'Why do they call?',
        exits: ['booking', 'question', 'other'],
        allowStay: true,
        attempt: 1,
      },
    ]);
    const stay = run(flow, [decided(5, 'cat', 'stay')], r.state);
    expect(stay.all).toEqual([{ type: 'generate_reply' }]);
    expect(stay.state).toMatchObject({ stepId: 'talk', phase: 'active' });
  });

  it('passes through the branch into the chosen exit', () => {
    const flow = compiled();
    const r = run(flow, [...toTalk, user(4), decided(5, 'cat', 1)]);
    expect(steps(r.perEvent[5]!)).toEqual(['cat', 'timer']);
    expect(r.state.stepId).toBe('timer');
  });

  it('stays when the evaluation fails or names an unknown exit', () => {
    const flow = compiled();
    for (const exit of ['error', 7, -1, 1.5] as const) {
      const r = run(flow, [...toTalk, user(4), decided(5, 'cat', exit)]);
      expect(r.perEvent[5]).toEqual([{ type: 'generate_reply' }]);
      expect(r.state).toMatchObject({ stepId: 'talk', phase: 'active' });
    }
  });

  it('ignores a user turn while evaluating and a stale decision for another step', () => {
    const flow = compiled();
    const r = run(flow, [...toTalk, user(4), user(5), decided(6, 'ifelse', 0)]);
    expect(r.perEvent[5]).toEqual([]);
    expect(r.perEvent[6]).toEqual([]);
    expect(r.state.phase).toBe('evaluating');
  });
});

describe('opentalk without a following branch', () => {
  const flow = () =>
    compiled(
      withEdge(
        withoutNode(withoutNode(withoutNode(fullFlow(), 'cat'), 'ifelse'), 'transfer'),
        'talk',
        'output',
        'timer',
      ),
    );

  it('offers the completion tool and moves on when the LLM calls it', () => {
    const f = flow();
    const r = run(f, [...toTalk]);
    expect(r.perEvent[3]).toContainEqual({
      type: 'set_instructions',
      instructions: 'You book appointments.\n\nFind out why they call.',
      completionTool: true,
    });
    expect(run(f, [user(4)], r.state).all).toEqual([{ type: 'generate_reply' }]);
    const done = run(f, [{ type: 'tool_called', at: 5, name: COMPLETE_STEP_TOOL, stepId: 'talk' }], r.state);
    expect(steps(done.all)).toEqual(['timer']);
    // the LLM is mid-reply when it calls the tool: no second reply is asked for
    expect(types(done.all)).not.toContain('generate_reply');
  });

  it('ignores other tools and a completion for another step', () => {
    const f = flow();
    const r = run(f, [...toTalk]);
    expect(run(f, [{ type: 'tool_called', at: 5, name: 'lookup', stepId: 'talk' }], r.state).all).toEqual([]);
    expect(
      run(f, [{ type: 'tool_called', at: 5, name: COMPLETE_STEP_TOOL, stepId: 'burst' }], r.state).all,
    ).toEqual([]);
  });
});

describe('timer', () => {
  const toTimer: EngineEvent[] = [...toTalk, user(4), decided(1000, 'cat', 1)];

  it('schedules the timer, keeps talking before the duration, advances on the first turn after it', () => {
    const flow = compiled();
    const r = run(flow, toTimer);
    expect(r.perEvent[5]).toContainEqual({ type: 'schedule_timer', stepId: 'timer', dueAt: 61_000 });
    expect(run(flow, [user(30_000)], r.state).all).toEqual([{ type: 'generate_reply' }]);
    expect(steps(run(flow, [user(61_000)], r.state).all)).toEqual(['end']);
  });

  it('elapsing while the agent speaks cuts nothing off: the next user turn advances', () => {
    const flow = compiled();
    const r = run(flow, [...toTimer, { type: 'timer_elapsed', at: 61_000, stepId: 'timer' }]);
    expect(r.perEvent.at(-1)).toEqual([]);
    expect(r.state.timerElapsed).toBe(true);
    // a clock that disagrees with the timer still advances: the elapsed event is enough
    expect(steps(run(flow, [said(61_500), user(50_000)], r.state).all)).toEqual(['end']);
  });

  it('ignores a timer event of a step that is no longer current', () => {
    const flow = compiled();
    const r = run(flow, [...toTalk, { type: 'timer_elapsed', at: 5, stepId: 'timer' }]);
    expect(r.state.timerElapsed).toBe(false);
  });
});

describe('ifelse and categorize entered directly', () => {
  // cat → ifelse: entered at once, evaluated without "stay"
  const toIfelse: EngineEvent[] = [...toTalk, user(4), decided(5, 'cat', 0)];

  it('evaluates at once when entered and follows each exit', () => {
    const flow = compiled();
    const r = run(flow, toIfelse);
    expect(r.perEvent[5]).toContainEqual({
      type: 'evaluate_branch',
      stepId: 'ifelse',
      kind: 'ifelse',
      question: 'The user confirmed the booking.',
      exits: ['true', 'false'],
      allowStay: false,
      attempt: 1,
    });
    expect(steps(run(flow, [decided(6, 'ifelse', 0)], r.state).all)).toEqual(['end']);
    expect(steps(run(flow, [decided(6, 'ifelse', 1)], r.state).all)).toEqual(['talk']);
  });

  it('retries a failed evaluation once, then takes the default exit (false / the last category)', () => {
    const flow = compiled();
    const r = run(flow, [...toIfelse, decided(6, 'ifelse', 'error')]);
    expect(r.perEvent.at(-1)).toEqual([
      expect.objectContaining({ type: 'evaluate_branch', stepId: 'ifelse', attempt: 2 }),
    ]);
    expect(MAX_BRANCH_ATTEMPTS).toBe(2);
    const fallback = run(flow, [decided(7, 'ifelse', 9)], r.state);
    expect(steps(fallback.all)).toEqual(['talk']);
  });

  it('takes each of three categories', () => {
    const flow = compiled();
    const at = run(flow, [...toTalk, user(4)]).state;
    expect(steps(run(flow, [decided(5, 'cat', 0)], at).all)).toEqual(['cat', 'ifelse']);
    expect(steps(run(flow, [decided(5, 'cat', 1)], at).all)).toEqual(['cat', 'timer']);
    expect(steps(run(flow, [decided(5, 'cat', 2)], at).all)).toEqual(['cat', 'transfer']);
  });
});

describe('transfer', () => {
  const toTransfer: EngineEvent[] = [...toTalk, user(4), decided(5, 'cat', 2)];

  it('asks the runtime to hand over to the target agent', () => {
    const r = run(compiled(), toTransfer);
    expect(r.perEvent.at(-1)).toContainEqual({
      type: 'transfer',
      stepId: 'transfer',
      targetAgentId: 'front-desk',
    });
    expect(r.state.phase).toBe('transferring');
  });

  it('to a phone number: asks the runtime to hand the call over to it', () => {
    const flow = compiled(
      withNode(fullFlow(), 'transfer', { targetAgentId: undefined, targetNumber: '+14155550100' }),
    );
    expect(flow.steps.transfer).toEqual({ kind: 'transfer', id: 'transfer', targetNumber: '+14155550100' });
    const r = run(flow, toTransfer);
    expect(r.perEvent.at(-1)).toContainEqual({
      type: 'transfer_to_number',
      stepId: 'transfer',
      targetNumber: '+14155550100',
    });
    expect(r.state.phase).toBe('transferring');
  });

  it.each(['missing', 'archived', 'unavailable'] as const)(
    'to a %s agent: apologizes, then ends with no post-processing',
    (reason) => {
      const flow = compiled();
      const r = run(flow, [
        ...toTransfer,
        { type: 'transfer_failed', at: 6, stepId: 'transfer', reason },
        said(7),
      ]);
      expect(r.perEvent.at(-2)).toEqual([
        { type: 'speak', literal: false, instruction: TRANSFER_FAILED_INSTRUCTION },
      ]);
      expect(r.perEvent.at(-1)).toEqual([{ type: 'end_session', reason: 'transfer_failed' }]);
      expect(r.state.phase).toBe('ended');
    },
  );
});

describe('end', () => {
  const toEnd: EngineEvent[] = [...toTalk, user(4), decided(5, 'cat', 0), decided(6, 'ifelse', 0)];

  it('says goodbye, then closes after it was spoken and runs post-processing', () => {
    const flow = compiled();
    const r = run(flow, toEnd);
    expect(r.perEvent.at(-1)).toEqual([
      { type: 'step_changed', stepId: 'end', stepType: 'end' },
      { type: 'set_instructions', instructions: 'You book appointments.\n\nGoodbye!', completionTool: false },
      { type: 'speak', literal: true, text: 'Goodbye!' },
    ]);
    expect(r.state.phase).toBe('closing');
    const closed = run(flow, [said(7)], r.state);
    expect(closed.all).toEqual([
      { type: 'end_session', reason: 'completed' },
      { type: 'run_post_processing', steps: flow.steps.end!.kind === 'end' ? flow.steps.end!.post : [] },
    ]);
  });

  it('reached twice, or any event after it, does nothing more', () => {
    const flow = compiled();
    const r = run(flow, [...toEnd, said(7)]);
    const after = run(
      flow,
      [
        said(8),
        user(9),
        decided(10, 'ifelse', 0),
        { type: 'session_started', at: 11 },
        { type: 'timer_elapsed', at: 12, stepId: 'timer' },
      ],
      r.state,
    );
    expect(after.all).toEqual([]);
    expect(after.state).toEqual(r.state);
  });

  it('ignores user turns while the goodbye is spoken', () => {
    const flow = compiled();
    const r = run(flow, [...toEnd, user(7)]);
    expect(r.perEvent.at(-1)).toEqual([]);
  });
});

describe('determinism', () => {
  it('the same events give the same actions and states', () => {
    const flow = compiled();
    const events = [...toTalk, user(4), decided(5, 'cat', 1), user(70_000), said(70_001)];
    expect(run(flow, events)).toEqual(run(flow, events));
  });
});
