import { lineSink } from '@vab/testkit';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { redactingDestination, Redactor, SecretsInPlay, sessionRedactor } from './redactor.js';

describe('the per-session redactor', () => {
  const r = sessionRedactor(
    { OPENAI_API_KEY: 'server-openai-1', LIVEKIT_URL: 'wss://media.example.com' },
    { openai: 'k3y-echo9', deepgram: 'k', anthropic: null },
  );

  it('removes every exact value in play, however short or shapeless, wherever it sits', () => {
    const event = {
      type: 'error',
      message: '401 invalid key "k3y-echo9"',
      nested: [{ s: 'x server-openai-1 y' }],
    };
    expect(r.deep(event)).toEqual({
      type: 'error',
      message: '401 invalid key "[redacted]"',
      nested: [{ s: 'x [redacted] y' }],
    });
    expect(event.message).toContain('k3y-echo9'); // a copy: the caller's object is left as it was
  });

  it('leaves values too short to be told from text, and the media server URL, alone', () => {
    expect(r.text('keep k and wss://media.example.com')).toBe('keep k and wss://media.example.com');
  });

  it('hands back the very object when nothing is in it (no copy on the hot path)', () => {
    const clean = { a: 'b', c: [1, 2] };
    expect(r.deep(clean)).toBe(clean);
    expect(new Redactor([]).deep(clean)).toBe(clean);
  });

  it('removes a key that contains another as a whole', () => {
    expect(new Redactor(['abcdef', 'abcdefghij']).text('abcdefghij')).toBe('[redacted]');
  });
});

describe("the process log's filter", () => {
  it("removes every session's values while it is in play and a while after, and the server's for good", () => {
    vi.useFakeTimers();
    try {
      const secrets = new SecretsInPlay();
      const lines: string[] = [];
      const log = pino({ base: undefined, timestamp: false }, redactingDestination(lineSink(lines), secrets));
      secrets.serverKeys({ OPENAI_API_KEY: 'server-openai-1' });
      const release = secrets.hold(new Redactor(['caller-key-1', 'quo"te-key']));
      // a library's line, in no session's context, the value escaped as JSON writes it
      log.error({ error: '401 invalid key Bearer caller-key-1 quo"te-key server-openai-1' }, 'failed');
      release();
      log.error('after caller-key-1');
      vi.advanceTimersByTime(60_001);
      log.error('later caller-key-1 server-openai-1');
      expect(
        lines.map(
          (l) =>
            (JSON.parse(l) as { error?: string; msg: string }).error ??
            (JSON.parse(l) as { msg: string }).msg,
        ),
      ).toEqual([
        '401 invalid key Bearer [redacted] [redacted] [redacted]',
        'after [redacted]',
        'later caller-key-1 [redacted]',
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps a value two sessions hold until both are done with it', () => {
    vi.useFakeTimers();
    try {
      const secrets = new SecretsInPlay();
      const first = secrets.hold(new Redactor(['shared-key-1']));
      const second = secrets.hold(new Redactor(['shared-key-1']));
      first();
      first();
      vi.advanceTimersByTime(60_001);
      expect(secrets.text('shared-key-1')).toBe('[redacted]');
      second();
      vi.advanceTimersByTime(60_001);
      expect(secrets.text('shared-key-1')).toBe('shared-key-1');
    } finally {
      vi.useRealTimers();
    }
  });
});
