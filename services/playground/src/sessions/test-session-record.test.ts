import { describe, expect, it } from 'vitest';
import { BEHIND_REAL_TIME, DRAINED } from './hosted-sessions.js';
import { endedReasonOf } from './test-session-record.js';

describe("a call's endedReason from why its session stopped (docs/api.md › Calls)", () => {
  it.each([
    // the reasons a builder reads in the call log, each from what the session said
    ['end step', 'agent_ended'],
    ['maximum session length', 'max_duration'],
    ['client never connected', 'no_connect'],
    ['shutdown', 'drained'],
    [DRAINED, 'drained'],
    ['silence_timeout', 'silence_timeout'],
    ['client gone', 'caller_hung_up'],
    [undefined, 'caller_hung_up'],
  ])('%s → %s', (stopReason, endedReason) => {
    expect(endedReasonOf(stopReason).endedReason).toBe(endedReason);
  });

  it('says an instance that could not keep up ended the call (overloaded), not that the instance was lost', () => {
    expect(endedReasonOf(BEHIND_REAL_TIME)).toEqual({ endedReason: 'overloaded' });
  });

  it('names a failed start a provider error with the kind `start`', () => {
    expect(endedReasonOf('failed start')).toEqual({
      endedReason: 'provider_error',
      endedDetail: { kind: 'start' },
    });
  });
});
