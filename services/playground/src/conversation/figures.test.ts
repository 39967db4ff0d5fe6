import { describe, expect, it } from 'vitest';
import { messageMetrics, redact, usageOf } from './figures.js';

describe('turn figures from LiveKit', () => {
  it("keeps a voice message's own figures in ms, its e2e latency as LiveKit computed it (not a sum)", () => {
    const m = messageMetrics({
      e2eLatency: 1.234,
      endOfTurnDelay: 0.5,
      transcriptionDelay: 0.2,
      llmNodeTtft: 0.3,
      ttsNodeTtfb: 0.15,
    });
    expect(m).toEqual({
      e2eLatencyMs: 1234,
      endOfTurnDelayMs: 500,
      transcriptionDelayMs: 200,
      llmTtftMs: 300,
      ttsTtfbMs: 150,
    });
    expect(messageMetrics({ llmNodeTtft: 0.25 })).toEqual({ llmTtftMs: 250 });
    expect(messageMetrics(undefined)).toEqual({});
  });

  it("maps LiveKit's usage collector per provider and model", () => {
    expect(
      usageOf({
        modelUsage: [
          {
            type: 'llm_usage',
            provider: 'openai',
            model: 'gpt-4o-mini',
            inputTokens: 10,
            outputTokens: 4,
            inputCachedTokens: 2,
          },
          { type: 'tts_usage', provider: 'elevenlabs', model: 'eleven_turbo', charactersCount: 120 },
          { type: 'stt_usage', provider: 'deepgram', model: 'nova-3', audioDurationMs: 4500 },
        ],
      } as never),
    ).toEqual([
      {
        kind: 'llm',
        provider: 'openai',
        model: 'gpt-4o-mini',
        promptTokens: 10,
        completionTokens: 4,
        cachedTokens: 2,
      },
      { kind: 'tts', provider: 'elevenlabs', model: 'eleven_turbo', ttsCharacters: 120 },
      { kind: 'stt', provider: 'deepgram', model: 'nova-3', sttAudioSeconds: 4.5 },
    ]);
  });

  it('cuts anything that looks like a credential out of a provider error', () => {
    const text = redact('401 Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789');
    expect(text).not.toContain('abcdefghijklmnop');
    expect(text).toContain('[redacted]');
  });
});
