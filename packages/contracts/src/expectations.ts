import { isDeepStrictEqual } from 'node:util';
import type { CaseExpectation, CaseFailure, CaseObservation } from './sessions.js';

/** True when `wanted` appears in `path` in order, other steps allowed in between. */
function isSubsequence(wanted: string[], path: string[]): boolean {
  let i = 0;
  for (const step of path) if (step === wanted[i]) i++;
  return i === wanted.length;
}

/**
 * Every expectation of a test case that the observed conversation does not meet, with what was expected and
 * what happened. Empty: the case passed.
 */
export function unmetExpectations(
  expect: CaseExpectation,
  seen: Pick<CaseObservation, 'steps' | 'ended' | 'endedAt' | 'replies' | 'structured'>,
): CaseFailure[] {
  const failures: CaseFailure[] = [];
  if (expect.steps && !isSubsequence(expect.steps, seen.steps)) {
    failures.push({
      expectation: 'steps',
      expected: expect.steps,
      actual: seen.steps,
      message: 'the conversation did not pass through these steps in this order',
    });
  }
  const mustEnd = expect.endsAt !== undefined ? true : expect.ends;
  if (mustEnd !== undefined && seen.ended !== mustEnd) {
    failures.push({
      expectation: 'ends',
      expected: mustEnd,
      actual: seen.ended,
      message: mustEnd ? 'the conversation did not end' : 'the conversation ended',
    });
  }
  if (expect.endsAt !== undefined && seen.ended && seen.endedAt !== expect.endsAt) {
    failures.push({
      expectation: 'endsAt',
      expected: expect.endsAt,
      actual: seen.endedAt,
      message: `the conversation ended at another step`,
    });
  }
  if (expect.replyContains) {
    const all = seen.replies.flat().join('\n').toLowerCase();
    const missing = expect.replyContains.filter((t) => !all.includes(t.toLowerCase()));
    if (missing.length > 0) {
      failures.push({
        expectation: 'replyContains',
        expected: missing,
        actual: seen.replies,
        message: `no reply contains ${missing.map((t) => JSON.stringify(t)).join(', ')}`,
      });
    }
  }
  if (expect.structured) {
    const got = seen.structured ?? {};
    const wrong = Object.keys(expect.structured).filter(
      (k) => !isDeepStrictEqual(got[k], expect.structured![k]),
    );
    if (wrong.length > 0) {
      failures.push({
        expectation: 'structured',
        expected: Object.fromEntries(wrong.map((k) => [k, expect.structured![k]])),
        actual: seen.structured,
        message: `structured output differs in ${wrong.join(', ')}`,
      });
    }
  }
  return failures;
}
