import type { CaseAttempt, CaseFailure, CaseObservation, CaseResult } from '@vab/contracts';

/** One text of an attempt as a run stores it (a reply, a user turn, a judge's reason, a raw answer). */
export const MAX_STORED_TEXT_CHARS = 2_000;
/** All replies and user turns of one attempt together; the full transcript stays in its test session. */
export const MAX_ATTEMPT_TEXT_CHARS = 16_000;

const cut = (s: string, max: number) =>
  s.length <= max ? s : `${s.slice(0, max)}…[truncated: ${s.length - max} more characters]`;

/** A text within both its own bound and what is left of the attempt's budget. */
function budgeted(s: string, left: { chars: number }): string {
  const max = Math.min(MAX_STORED_TEXT_CHARS, Math.max(0, left.chars));
  left.chars -= Math.min(s.length, max);
  if (max === 0 && s.length > 0) return `…[not stored: ${s.length} characters over the attempt's budget]`;
  return cut(s, max);
}

function boundObservation(o: CaseObservation | null): CaseObservation | null {
  if (!o) return o;
  const left = { chars: MAX_ATTEMPT_TEXT_CHARS };
  // turn by turn, as the conversation went: the first turns are kept whole
  const turns = Math.max(o.replies.length, o.userTurns.length);
  const replies: string[][] = o.replies.map(() => []);
  const userTurns: string[] = [...o.userTurns];
  for (let t = 0; t < turns; t++) {
    if (t < o.replies.length) replies[t] = o.replies[t]!.map((r) => budgeted(r, left));
    if (t < o.userTurns.length) userTurns[t] = budgeted(o.userTurns[t]!, left);
  }
  // what a voice caller heard is the agent's replies once more: from what is left of the same budget
  const voice = o.voice ? { ...o.voice, heard: o.voice.heard.map((h) => budgeted(h, left)) } : o.voice;
  return {
    ...o,
    replies,
    userTurns,
    voice,
    judgements: o.judgements?.map((j) => ({ ...j, reason: cut(j.reason, MAX_STORED_TEXT_CHARS) })) ?? null,
    error: o.error
      ? {
          ...o.error,
          message: cut(o.error.message, MAX_STORED_TEXT_CHARS),
          raw: o.error.raw === null ? null : cut(o.error.raw, MAX_STORED_TEXT_CHARS),
        }
      : null,
  };
}

const boundFailure = (f: CaseFailure): CaseFailure => ({
  ...f,
  message: cut(f.message, MAX_STORED_TEXT_CHARS),
  // `actual` may be what the agent said (replyContains): bounded as its JSON text
  actual:
    JSON.stringify(f.actual ?? null).length > MAX_STORED_TEXT_CHARS
      ? cut(JSON.stringify(f.actual), MAX_STORED_TEXT_CHARS)
      : f.actual,
});

const boundAttempt = (a: CaseAttempt): CaseAttempt => ({
  ...a,
  failures: a.failures.map(boundFailure),
  observed: boundObservation(a.observed),
  error: a.error === null ? null : cut(a.error, MAX_STORED_TEXT_CHARS),
  raw: a.raw === null ? null : cut(a.raw, MAX_STORED_TEXT_CHARS),
});

/**
 * A case result as a run stores it: every text bounded, each attempt's replies and user turns within one
 * budget (truncation marked in the text). A run stays readable however long its conversations were; each
 * attempt's whole transcript is in its test session (`observed.sessionId`).
 */
export function boundResult(r: CaseResult): CaseResult {
  return {
    ...r,
    failures: r.failures.map(boundFailure),
    observed: boundObservation(r.observed),
    error: r.error === null ? null : cut(r.error, MAX_STORED_TEXT_CHARS),
    repeats: r.repeats.map(boundAttempt),
  };
}

/** A case as the run list shows it: verdict, attempts and pass rate; the details are the run's own read. */
export const caseSummary = (r: CaseResult): CaseResult => ({
  ...r,
  failures: [],
  observed: null,
  error: r.error === null ? null : cut(r.error, 200),
  repeats: [],
});
