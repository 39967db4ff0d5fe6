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
      'Step complete. From now on, follow these instructions:\n\nBe brief.\n\nAsk for the email address.',
    );
  });

  it("asks for an end step's goodbye, word for word when it is literal", () => {
    const end = [changed, instructions('Be brief.\n\nThank them.')];
    expect(completionAnswer([...end, { type: 'speak', literal: false, instruction: 'Thank them.' }])).toBe(
      'Step complete. End the conversation now: Thank them.',
    );
    expect(completionAnswer([...end, { type: 'speak', literal: true, text: 'Bye now.' }])).toBe(
      'Step complete. End the conversation now: say exactly "Bye now."',
    );
  });

  it('says a transfer follows the reply, and nothing more when no instructions came', () => {
    const transfer: EngineAction = { type: 'transfer', stepId: 'transfer', targetAgentId: 'a1' };
    expect(completionAnswer([changed, transfer])).toContain('handed over to another agent');
    expect(completionAnswer([changed])).toBe('Step complete.');
  });
});
