import type { Criterion, Judgement } from '@vab/contracts';
import { z } from 'zod';
import { transcriptText, type Turn } from '../conversation/transcript.js';
import { forcedToolCall, type CaseModelClient } from '../models/model-call.js';

export const VERDICT_TOOL = 'verdict';

const Verdict = z.object({
  passed: z.boolean(),
  reason: z.string().trim().min(1).max(4000),
  turn: z.number().int().nonnegative().nullable().optional(),
});

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
  /** What else the judges see beside the transcript (a voice call's figures). */
  beside?: string,
): Promise<Judgement[]> {
  const text = transcriptText(transcript, { numbered: true }) + (beside ? `\n\n${beside}` : '');
  return Promise.all(
    criteria.map(async (c) => {
      const verdict = await forcedToolCall(
        client,
        [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: `Transcript:\n${text}\n\nCriterion "${c.name}": ${c.description}` },
        ],
        {
          name: VERDICT_TOOL,
          description: 'Record your verdict on the criterion.',
          parameters: Verdict,
          failure: `the judge's answer on "${c.name}" is not a valid ${VERDICT_TOOL}`,
        },
      );
      const turn = verdict.turn ?? null;
      return {
        criterion: c.name,
        passed: verdict.passed,
        reason: verdict.reason,
        turn: turn !== null && turn >= 1 && turn <= transcript.length ? turn : null,
      };
    }),
  );
}
