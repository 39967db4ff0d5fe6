import { isDeepStrictEqual } from 'node:util';
import type { CaseExpectation, CaseFailure, CaseObservation, VoiceFigures } from './sessions.js';

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
  seen: Pick<CaseObservation, 'steps' | 'ended' | 'endedAt' | 'replies' | 'structured'> & {
    voice?: CaseObservation['voice'] | undefined;
  },
): CaseFailure[] {
  const failures: CaseFailure[] = [];
  failures.push(...unmetVoiceBounds(expect, seen.voice ?? null));
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

/** The voice bounds a call's audio figures break (a text attempt, with no figures, breaks each one set). */
function unmetVoiceBounds(expect: CaseExpectation, v: VoiceFigures | null): CaseFailure[] {
  const failures: CaseFailure[] = [];
  const fail = (
    expectation: CaseFailure['expectation'],
    expected: number,
    actual: unknown,
    message: string,
  ) => failures.push({ expectation, expected, actual, message });
  if (expect.maxResponseMs !== undefined) {
    const slow =
      v?.turns.filter((t) => t.responseMs === null || t.responseMs > expect.maxResponseMs!) ?? null;
    if (slow === null || slow.length > 0) {
      fail(
        'maxResponseMs',
        expect.maxResponseMs,
        slow ?? null,
        v
          ? `${slow!.length} caller turn(s) answered later than ${expect.maxResponseMs} ms, or not at all`
          : NOT_VOICE,
      );
    }
  }
  if (expect.maxAgentInterruptions !== undefined) {
    const seen = v?.agentInterruptions ?? null;
    if (seen === null || seen.count > expect.maxAgentInterruptions) {
      fail(
        'maxAgentInterruptions',
        expect.maxAgentInterruptions,
        seen,
        seen ? `the agent talked over the caller ${seen.count} time(s) (${seen.totalMs} ms)` : NOT_VOICE,
      );
    }
  }
  if (expect.maxSilenceMs !== undefined) {
    const longest = v?.longestSilenceMs ?? null;
    if (longest === null || longest > expect.maxSilenceMs) {
      fail(
        'maxSilenceMs',
        expect.maxSilenceMs,
        longest,
        longest !== null ? `the agent left the caller in a silence of ${longest} ms` : NOT_VOICE,
      );
    }
  }
  if (expect.maxBargeInStopMs !== undefined) {
    const late = v?.bargeIns.filter((b) => b.stopMs === null || b.stopMs > expect.maxBargeInStopMs!) ?? null;
    if (late === null || late.length > 0) {
      fail(
        'maxBargeInStopMs',
        expect.maxBargeInStopMs,
        late ?? null,
        late
          ? `the agent kept talking past ${expect.maxBargeInStopMs} ms after ${late.length} barge-in(s)`
          : NOT_VOICE,
      );
    }
  }
  return failures;
}

const NOT_VOICE = 'no audio figures: the attempt was not a voice call';
