import { llm } from '@livekit/agents';
import type { Simulation } from '@vab/contracts';
import { z } from 'zod';
import type { Turn } from '../conversation/transcript.js';
import { ModelAnswerError, rawOf, safeJson, type CaseModelClient } from '../models/model-call.js';

/** How the simulated caller ends the call: the one tool it has. */
export const END_CALL_TOOL = 'end_call';

const EndCall = z.object({
  outcome: z.enum(['goal_reached', 'gave_up']),
  reason: z.string().max(2000).optional(),
});

export type CallerMove = { say: string } | { end: 'goal_reached' | 'gave_up'; reason: string | undefined };

/** The longest line a caller may say (a text turn's own bound). */
const MAX_LINE = 4000;

function systemPrompt(s: Simulation): string {
  return [
    'You play a caller phoning a voice agent, to test that agent. Stay in character; never say you are a ' +
      'test or a model.',
    `Who you are: ${s.persona}`,
    `What you want from this call: ${s.goal}`,
    'Each time, answer with only what the caller says next: one short spoken turn, plain text, no stage ' +
      'directions, no quotes.',
    `When your goal has been reached, call ${END_CALL_TOOL} with outcome "goal_reached" instead of speaking; ` +
      `when you give up on it (the agent cannot or will not help), call it with outcome "gave_up".`,
  ].join('\n');
}

/**
 * The simulated caller of one attempt: a model that chooses each user turn from the conversation so far,
 * from the case's persona and goal, and ends the call with a tool when its goal is reached or given up.
 * The conversation is shown to it from its side (the agent's lines as the other party's).
 */
export class SimulatedCaller {
  private readonly tools = {
    [END_CALL_TOOL]: llm.tool({
      description: 'Hang up: your goal was reached, or you give up on it.',
      parameters: EndCall,
      execute: async () => 'ok',
    }),
  };

  constructor(
    private readonly client: CaseModelClient,
    private readonly simulation: Simulation,
  ) {}

  /** The caller's next move; throws `ModelAnswerError` (with its raw answer) when it gave neither. */
  async next(transcript: Turn[]): Promise<CallerMove> {
    const messages: { role: 'system' | 'user' | 'assistant'; content: string }[] = [
      { role: 'system', content: systemPrompt(this.simulation) },
    ];
    for (const t of transcript) {
      messages.push({ role: t.role === 'assistant' ? 'user' : 'assistant', content: t.content });
    }
    // the model answers the other party: a call whose agent has not spoken (yet) still needs a line to answer
    if (messages.at(-1)!.role !== 'user')
      messages.push({ role: 'user', content: '(the agent says nothing)' });
    const answer = await this.client.complete(messages, this.tools, 'auto');
    const call = answer.toolCalls.find((c) => c.name === END_CALL_TOOL);
    if (call) {
      const parsed = EndCall.safeParse(safeJson(call.args));
      if (!parsed.success) {
        throw new ModelAnswerError(
          `${END_CALL_TOOL} was called with arguments that do not fit`,
          rawOf(answer),
        );
      }
      return { end: parsed.data.outcome, reason: parsed.data.reason };
    }
    const said = answer.text.trim();
    if (said === '') throw new ModelAnswerError('the simulated caller said nothing', rawOf(answer));
    return { say: said.slice(0, MAX_LINE) };
  }
}
