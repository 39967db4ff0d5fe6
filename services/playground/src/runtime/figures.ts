import type { llm, metrics, voice } from '@livekit/agents';
import type { ModelUsage, SessionUsage, TurnMetrics } from '@vab/contracts';

const ms = (seconds: number | undefined) =>
  seconds === undefined || !Number.isFinite(seconds)
    ? undefined
    : Math.max(0, Math.round(seconds * 10_000) / 10);

/** LiveKit's own figures on an agent message (seconds), as ours (ms). Its e2e latency is kept as it is. */
export function messageMetrics(report: llm.MetricsReport | undefined): TurnMetrics {
  if (!report) return {};
  const out: TurnMetrics = {
    e2eLatencyMs: ms(report.e2eLatency),
    endOfTurnDelayMs: ms(report.endOfTurnDelay),
    transcriptionDelayMs: ms(report.transcriptionDelay),
    llmTtftMs: ms(report.llmNodeTtft),
    ttsTtfbMs: ms(report.ttsNodeTtfb),
  };
  return withoutUndefined(out);
}

function withoutUndefined(m: TurnMetrics): TurnMetrics {
  return Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as TurnMetrics;
}

/**
 * What one text turn took: started when the user's text (or the session start) arrives; the model's time
 * to first token (LiveKit's per-message figure, else the first reply call's own), every model call's
 * duration, tool time.
 */
export class TurnClock {
  private llmTtftMs: number | undefined;
  private llmDurationMs = 0;
  private toolMs = 0;

  constructor(private readonly startedAt: number) {}

  llmCall(m: metrics.LLMMetrics): void {
    this.llmDurationMs += m.durationMs;
    // a branch decision is a model call too, but not the one the user waits on for the reply; a call that
    // failed before its first token reports -1 (LiveKit's "none"), which is no time to first token
    if (this.llmTtftMs === undefined && m.speechId && m.ttftMs >= 0) this.llmTtftMs = m.ttftMs;
  }

  reply(report: llm.MetricsReport | undefined): void {
    const ttft = ms(report?.llmNodeTtft);
    if (ttft !== undefined && this.llmTtftMs === undefined) this.llmTtftMs = ttft;
  }

  tool(durationMs: number): void {
    this.toolMs += durationMs;
  }

  figures(now: number): TurnMetrics {
    const round = (v: number) => Math.round(v * 10) / 10;
    return withoutUndefined({
      llmTtftMs: this.llmTtftMs === undefined ? undefined : round(this.llmTtftMs),
      llmDurationMs: this.llmDurationMs > 0 ? round(this.llmDurationMs) : undefined,
      toolMs: this.toolMs > 0 ? round(this.toolMs) : undefined,
      turnMs: round(Math.max(0, now - this.startedAt)),
    });
  }
}

/** LiveKit's usage collector, per provider and model, as ours. */
export function usageOf(usage: voice.AgentSessionUsage): SessionUsage {
  const out: SessionUsage = [];
  for (const u of usage.modelUsage) {
    const base = { provider: String(u.provider ?? 'unknown'), model: String(u.model ?? 'unknown') };
    let entry: ModelUsage | undefined;
    if (u.type === 'llm_usage') {
      const l = u as Partial<metrics.LLMModelUsage>;
      entry = {
        kind: 'llm',
        ...base,
        promptTokens: l.inputTokens ?? 0,
        completionTokens: l.outputTokens ?? 0,
        cachedTokens: l.inputCachedTokens ?? 0,
      };
    } else if (u.type === 'tts_usage') {
      entry = {
        kind: 'tts',
        ...base,
        ttsCharacters: (u as Partial<metrics.TTSModelUsage>).charactersCount ?? 0,
      };
    } else if (u.type === 'stt_usage') {
      const audioMs = (u as Partial<metrics.STTModelUsage>).audioDurationMs ?? 0;
      entry = { kind: 'stt', ...base, sttAudioSeconds: Math.round(audioMs) / 1000 };
    }
    if (entry) out.push(entry);
  }
  return out.slice(0, 100);
}

/** Anything that looks like a credential in a provider's error text is cut out before it leaves the process. */
export const redact = (text: string) => text.replace(/[A-Za-z0-9_\-.]{24,}/g, '[redacted]').slice(0, 500);
