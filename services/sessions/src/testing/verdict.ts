import {
  unmetExpectations as judge,
  type CaseAttempt,
  type CaseObservation,
  type CaseVerdict,
  type TestCase,
} from '@vab/contracts';

export { judge };

/**
 * One attempt's verdict: an attempt whose simulator or judge failed errors (it never passes); otherwise its
 * unmet expectations, then every criterion a judge decided against.
 */
export function attemptVerdict(
  c: Pick<TestCase, 'expect' | 'criteria'>,
  seen: CaseObservation,
): Pick<CaseAttempt, 'verdict' | 'failures' | 'error' | 'raw'> {
  if (seen.error) {
    return {
      verdict: 'errored',
      failures: [],
      error: `${seen.error.role}: ${seen.error.message}`,
      raw: seen.error.raw,
    };
  }
  const failures = judge(c.expect, seen);
  if (failures.length === 0 && c.criteria.length > 0 && seen.judgements === null) {
    return { verdict: 'errored', failures, error: 'judge: the criteria were not judged', raw: null };
  }
  for (const j of seen.judgements ?? []) {
    if (j.passed) continue;
    failures.push({
      expectation: 'criterion',
      expected: j.criterion,
      actual: j,
      message: `${j.criterion}: ${j.reason}${j.turn !== null ? ` (turn ${j.turn})` : ''}`,
    });
  }
  return { verdict: failures.length === 0 ? 'passed' : 'failed', failures, error: null, raw: null };
}

/**
 * A case's verdict over its repeats: running until each has finished; then passed when the share of passed
 * attempts meets `minPassRate`; errored when it does not and errored attempts are why (they would have made
 * it); failed otherwise.
 */
export function caseVerdict(
  repeats: CaseAttempt[],
  minPassRate: number,
): { verdict: CaseVerdict; passRate: number | null } {
  if (repeats.some((a) => a.verdict === 'queued' || a.verdict === 'running')) {
    return {
      verdict: repeats.every((a) => a.verdict === 'queued') ? 'queued' : 'running',
      passRate: null,
    };
  }
  const n = repeats.length;
  const passed = repeats.filter((a) => a.verdict === 'passed').length;
  const errored = repeats.filter((a) => a.verdict === 'errored').length;
  const passRate = n === 0 ? 0 : passed / n;
  // a rate is a ratio of small integers: compare without float noise (0.6 of 5 is 3 of 5)
  const meets = (k: number) => k >= Math.ceil(minPassRate * n - 1e-9);
  const verdict = meets(passed) ? 'passed' : meets(passed + errored) && errored > 0 ? 'errored' : 'failed';
  return { verdict, passRate };
}
