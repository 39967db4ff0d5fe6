import type { CaseAttempt, CaseObservation } from '@vab/contracts';
import { describe, expect, it } from 'vitest';
import { attemptVerdict, caseVerdict } from './verdict.js';

const attempt = (verdict: CaseAttempt['verdict']): CaseAttempt => ({
  index: 0,
  verdict,
  failures: [],
  observed: null,
  error: null,
  raw: null,
});
const many = (spec: Partial<Record<CaseAttempt['verdict'], number>>) =>
  Object.entries(spec).flatMap(([v, n]) =>
    Array.from({ length: n }, () => attempt(v as CaseAttempt['verdict'])),
  );

const seen = (over: Partial<CaseObservation> = {}): CaseObservation => ({
  sessionId: 's',
  steps: ['start'],
  replies: [['Hello']],
  ended: false,
  endedAt: null,
  structured: null,
  metrics: [],
  userTurns: [],
  endedBy: 'max_turns',
  seed: null,
  judgements: null,
  usage: { agent: [], simulator: [], judge: [] },
  error: null,
  voice: null,
  ...over,
});

describe('a case verdict over its repeats', () => {
  it('passes when the share of passed attempts meets minPassRate, exactly at the boundary', () => {
    expect(caseVerdict(many({ passed: 3, failed: 2 }), 0.6)).toEqual({ verdict: 'passed', passRate: 0.6 });
    expect(caseVerdict(many({ passed: 6, failed: 4 }), 0.8)).toEqual({ verdict: 'failed', passRate: 0.6 });
    expect(caseVerdict(many({ passed: 7, failed: 3 }), 0.7)).toEqual({ verdict: 'passed', passRate: 0.7 });
  });

  it('errors when errored attempts, never passes, are why it missed; fails when failures alone are', () => {
    expect(caseVerdict(many({ passed: 4, errored: 1 }), 1)).toMatchObject({
      verdict: 'errored',
      passRate: 0.8,
    });
    expect(caseVerdict(many({ passed: 2, failed: 2, errored: 1 }), 0.8)).toMatchObject({ verdict: 'failed' });
    expect(caseVerdict(many({ errored: 1 }), 1)).toMatchObject({ verdict: 'errored', passRate: 0 });
  });

  it('is running while any attempt is, with no rate yet', () => {
    expect(caseVerdict(many({ passed: 1, running: 1 }), 1)).toEqual({ verdict: 'running', passRate: null });
    expect(caseVerdict(many({ queued: 2 }), 1)).toEqual({ verdict: 'queued', passRate: null });
  });
});

describe('an attempt verdict', () => {
  const c = { expect: {}, criteria: [{ name: 'polite', description: 'Stays polite.' }] };

  it('errors on a simulator or judge error, keeping the raw answer', () => {
    const v = attemptVerdict(c, seen({ error: { role: 'judge', message: 'not a verdict', raw: '{"x":1}' } }));
    expect(v).toEqual({ verdict: 'errored', failures: [], error: 'judge: not a verdict', raw: '{"x":1}' });
  });

  it('fails a criterion the judge decided against, citing its turn', () => {
    const judgements = [{ criterion: 'polite', passed: false, reason: 'It shouts.', turn: 3 }];
    const v = attemptVerdict(c, seen({ judgements }));
    expect(v.verdict).toBe('failed');
    expect(v.failures[0]).toMatchObject({ expectation: 'criterion', message: 'polite: It shouts. (turn 3)' });
  });

  it('never passes criteria nobody judged', () => {
    expect(attemptVerdict(c, seen()).verdict).toBe('errored');
  });

  it('reports unmet expectations first, and then nothing was judged', () => {
    const v = attemptVerdict({ ...c, expect: { ends: true } }, seen());
    expect(v).toMatchObject({ verdict: 'failed', failures: [{ expectation: 'ends' }] });
  });
});

describe('voice bounds', () => {
  const voice = (over: Partial<NonNullable<CaseObservation['voice']>> = {}): CaseObservation['voice'] => ({
    durationMs: 20_000,
    turns: [
      { callerEndMs: 4000, responseMs: 900 },
      { callerEndMs: 9000, responseMs: 1400 },
    ],
    agentInterruptions: { count: 0, totalMs: 0 },
    bargeIns: [{ atMs: 12_000, stopMs: 700 }],
    silences: [],
    silenceBoundMs: 2000,
    longestSilenceMs: 1400,
    talkMs: { agent: 8000, caller: 6000 },
    noiseSnrDb: null,
    heard: [],
    ...over,
  });
  const verdict = (expect: object, v: CaseObservation['voice']) =>
    attemptVerdict({ expect, criteria: [] }, seen({ voice: v }));

  it('passes figures within their bounds, exactly at them', () => {
    const bounds = {
      maxResponseMs: 1400,
      maxAgentInterruptions: 0,
      maxSilenceMs: 1400,
      maxBargeInStopMs: 700,
    };
    expect(verdict(bounds, voice()).verdict).toBe('passed');
  });

  it('fails each figure past its bound, with what was measured', () => {
    const v = verdict(
      { maxResponseMs: 1000, maxAgentInterruptions: 0, maxSilenceMs: 1000, maxBargeInStopMs: 500 },
      voice({ agentInterruptions: { count: 2, totalMs: 900 } }),
    );
    expect(v.failures.map((f) => f.expectation)).toEqual([
      'maxResponseMs',
      'maxAgentInterruptions',
      'maxSilenceMs',
      'maxBargeInStopMs',
    ]);
    expect(v.failures[0]!.actual).toEqual([{ callerEndMs: 9000, responseMs: 1400 }]);
    expect(v.failures[1]!.message).toBe('the agent talked over the caller 2 time(s) (900 ms)');
  });

  it('fails a turn never answered, a barge-in never stopped, and a bound on a call with no audio', () => {
    const v = voice({
      turns: [{ callerEndMs: 4000, responseMs: null }],
      bargeIns: [{ atMs: 1, stopMs: null }],
    });
    expect(verdict({ maxResponseMs: 60_000, maxBargeInStopMs: 30_000 }, v).failures).toHaveLength(2);
    expect(verdict({ maxSilenceMs: 5000 }, null).failures[0]!.message).toContain('not a voice call');
  });
});
