import { METRIC_NAMES } from '@vab/contracts';
import { processMetrics } from '@vab/service-kit';
import { describe, expect, it } from 'vitest';
import { figureLabel, modelKindLabel, observeTurn, providerLabel } from './metrics.js';

describe('playground labels stay bounded', () => {
  it('a provider is an id of the provider table or other: never a host a flow chose, nor a URL', () => {
    expect(providerLabel('openai')).toBe('openai');
    // LiveKit's OpenAI plugin names its provider by its base URL's host
    expect(providerLabel('api.openai.com')).toBe('openai');
    expect(providerLabel('api.groq.com')).toBe('groq');
    expect(providerLabel('generativelanguage.googleapis.com')).toBe('google');
    expect(providerLabel('127.0.0.1:53111')).toBe('other');
    expect(providerLabel('user:sk-secret@evil.example')).toBe('other');
    expect(providerLabel(undefined)).toBe('other');
  });

  it('a model kind is llm, tts, stt or other', () => {
    expect(modelKindLabel('llm_metrics')).toBe('llm');
    expect(modelKindLabel('tts_error')).toBe('tts');
    expect(modelKindLabel('stt_metrics')).toBe('stt');
    expect(modelKindLabel('vad_metrics')).toBe('other');
  });

  it('each turn figure has its own label, in seconds', async () => {
    expect(METRIC_NAMES.map(figureLabel)).toEqual([
      'e2e',
      'response',
      'end_of_turn_delay',
      'transcription_delay',
      'llm_ttft',
      'llm_duration',
      'tts_ttfb',
      'tool',
      'turn',
    ]);
    observeTurn('text', { turnMs: 1500, llmTtftMs: 250 });
    const text = await processMetrics().registry.getSingleMetricAsString('playground_turn_figure_seconds');
    expect(text).toMatch(/playground_turn_figure_seconds_sum\{figure="turn",session_type="text"\} 1\.5/);
    expect(text).toMatch(
      /playground_turn_figure_seconds_bucket\{le="0\.3",figure="llm_ttft",session_type="text"\} 1/,
    );
    expect(text).not.toContain('figure="e2e"');
  });
});
