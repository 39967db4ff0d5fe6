import { llm } from '@livekit/agents';
import type { Criterion, Judgement } from '@vab/contracts';
import { z } from 'zod';
import type { Turn } from '../runtime/judge.js';
import { ModelAnswerError, rawOf, type CaseModelClient } from './model-call.js';
import { safeJson } from './simulator.js';

export const VERDICT_TOOL = 'verdict';

const Verdict = z.object({
  passed: z.boolean(),
  reason: z.string().trim().min(1).max(4000),
  turn: z.number().int().nonnegative().nullable().optional(),
});

/** Turns numbered from 1, as the attempt's test session lists its messages. */
export function numbered(transcript: Turn[]): string {
  return transcript
    .map((t, i) => `Turn ${i + 1}, ${t.role === 'user' ? 'Caller' : 'Agent'}: ${t.content}`)
    .join('\n');
}

const SYSTEM =
  'You judge one criterion over the transcript of a call between a voice agent and a caller. Answer only by ' +
  `calling ${VERDICT_TOOL}: passed (whether the agent met the criterion), a short reason, and the number of ` +
  'the turn the reason rests on (null when no single turn does).';

/**
 * Asks the judge model about each criterion, in parallel, each on its own (one criterion's answer never
 * colours another's). Throws `ModelAnswerError` with the raw answer when one is not the structured verdict.
 */
export async function judgeCriteria(
  client: CaseModelClient,
  criteria: Criterion[],
  transcript: Turn[],
): Promise<Judgement[]> {
  const tools = {
    [VERDICT_TOOL]: llm.tool({
      description: 'Record your verdict on the criterion.',
      parameters: Verdict,
      execute: async () => 'ok',
    }),
  };
  const text = numbered(transcript);
  return Promise.all(
    criteria.map(async (c) => {
      const answer = await client.complete(
        [
          { role: 'system', content: SYSTEM },
          {
            role: 'user',
            content: `Transcript:\n${text}\n\nCriterion "${c.name}": ${c.description}`,
          },
        ],
        tools,
        'required',
      );
      const call = answer.toolCalls.find((t) => t.name === VERDICT_TOOL);
      const parsed = call ? Verdict.safeParse(safeJson(call.args)) : undefined;
      if (!parsed?.success) {
        throw new ModelAnswerError(
          `the judge's answer on "${c.name}" is not a valid ${VERDICT_TOOL}`,
          rawOf(answer),
        );
      }
      const turn = parsed.data.turn ?? null;
      return {
        criterion: c.name,
        passed: parsed.data.passed,
        reason: parsed.data.reason,
        turn: turn !== null && turn >= 1 && turn <= transcript.length ? turn : null,
      };
    }),
  );
}
