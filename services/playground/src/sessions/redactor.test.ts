import { describe, expect, it } from 'vitest';
import { Redactor, sessionRedactor } from './redactor.js';

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
