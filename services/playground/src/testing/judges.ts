import type { Criterion, CriterionVerdict, Judgement } from '@vab/contracts';
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

export const CALL_VERDICT_TOOL = 'call_verdict';

const CallVerdict = z.object({
  verdict: z.enum(['passed', 'failed', 'unknown']),
  reason: z.string().trim().min(1).max(4000),
});

const CALL_SYSTEM =
  'You judge one criterion over the transcript of a real call between a voice agent and a caller. Answer ' +
  `only by calling ${CALL_VERDICT_TOOL}: passed or failed when the transcript shows whether the agent met the ` +
  'criterion, unknown when it does not say (the call ended first, the topic never came up), and a short reason.';

/**
 * A call analysis' criteria (the same criteria a test case's judges read): each judged on its own, in
 * parallel, as passed, failed, or unknown (a real call, unlike a test case, may never reach what a criterion
 * asks about). Throws `ModelAnswerError` when an answer is not the structured verdict.
 */
export async function judgeCallCriteria(
  client: CaseModelClient,
  criteria: Criterion[],
  transcript: Turn[],
): Promise<CriterionVerdict[]> {
  const text = transcriptText(transcript, { numbered: true });
  return Promise.all(
    criteria.map(async (c) => {
      const v = await forcedToolCall(
        client,
        [
          { role: 'system', content: CALL_SYSTEM },
          { role: 'user', content: `Transcript:\n${text}\n\nCriterion "${c.name}": ${c.description}` },
        ],
        {
          name: CALL_VERDICT_TOOL,
          description: 'Record your verdict on the criterion.',
          parameters: CallVerdict,
          failure: `the analyst's answer on "${c.name}" is not a valid ${CALL_VERDICT_TOOL}`,
        },
      );
      return { name: c.name, verdict: v.verdict, reason: v.reason };
    }),
  );
}
