import type { EngineAction } from '@vab/flow';
import { describe, expect, it } from 'vitest';
import { completionAnswer } from './conversation.js';

const changed: EngineAction = { type: 'step_changed', stepId: 'next', stepType: 'burst' };
const instructions = (text: string): EngineAction => ({
  type: 'set_instructions',
  instructions: text,
  completionTool: false,
});

describe("complete_step's answer to the model", () => {
  it("carries the next step's instructions, which the rest of the reply would not see otherwise", () => {
    expect(completionAnswer([changed, instructions('Be brief.\n\nAsk for the email address.')])).toBe(
      'Step complete. For the rest of this reply, follow these instructions:\n\nBe brief.\n\nAsk for the email address.',
    );
  });

  it("asks for an end step's goodbye, word for word when it is literal", () => {
    const end = [changed, instructions('Be brief.\n\nThank them.')];
    expect(completionAnswer([...end, { type: 'speak', literal: false, instruction: 'Thank them.' }])).toBe(
      'Step complete. End the conversation with the rest of this reply: Thank them.',
    );
    expect(completionAnswer([...end, { type: 'speak', literal: true, text: 'Bye now.' }])).toBe(
      'Step complete. End the conversation with the rest of this reply, saying exactly: "Bye now."',
    );
  });

  it('says a transfer follows the reply, and that nothing was completed where there was no step to complete', () => {
    const transfer: EngineAction = { type: 'transfer', stepId: 'transfer', targetAgentId: 'a1' };
    expect(completionAnswer([changed, transfer])).toContain('handed over to another agent');
    expect(completionAnswer([changed])).toBe('Step complete.');
    // called in a step the engine does not complete with it (a burst an opentalk step led to, say)
    expect(completionAnswer([])).toBe('There is no step to complete here: carry on.');
  });
});
