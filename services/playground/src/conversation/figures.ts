import type { llm, metrics, voice } from '@livekit/agents';
import type { ModelUsage, SessionUsage, TurnFailure, TurnMetrics } from '@vab/contracts';
import { overBoundMessage } from '../egress/client.js';

const ms = (seconds: number | undefined) =>
  seconds === undefined || !Number.isFinite(seconds)
    ? undefined
    : seconds < 0 // LiveKit's -1: not measured (the call failed)
      ? undefined
      : Math.round(seconds * 10_000) / 10;

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
    if (m.durationMs > 0) this.llmDurationMs += m.durationMs;
    // a branch decision is a model call too, but not the one the user waits on for the reply
    // LiveKit reports -1 for a call that never got a first token: absent, not a figure
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

/** A URL in a message loses its user info, query and fragment (a key may ride in `?key=`). */
const withoutUrlSecrets = (text: string) =>
  text.replace(
    /\b(https?|wss?):\/\/(?:[^\s/@]*@)?([^\s/?#]+)([^\s?#]*)(?:\?[^\s#]*)?(?:#\S*)?/gi,
    '$1://$2$3',
  );

const CONNECTION_ERRORS = new Set(['APIConnectionError', 'APIStatusError', 'EgressRefused']);

const MODALITY: Record<string, TurnFailure['modality']> = {
  llm_error: 'llm',
  tts_error: 'tts',
  stt_error: 'stt',
};

/**
 * What a model error of LiveKit's session says about the turn: the failing node, the kind of failure and a
 * message fit to leave the process. Connection failures of every sort read the same (one fixed message):
 * an answer must not tell a refused port from a reset or a silent one.
 */
export function turnFailureOf(
  ev: { error: unknown },
  nodeOf: (modality: TurnFailure['modality']) => string,
): TurnFailure | undefined {
  const outer = ev.error as { type?: string; error?: unknown };
  const modality = MODALITY[outer.type ?? ''];
  if (!modality) return undefined;
  const inner = (outer.error ?? {}) as { name?: string; statusCode?: number; message?: string };
  const status = typeof inner.statusCode === 'number' && inner.statusCode > 0 ? inner.statusCode : undefined;
  const base = { nodeId: nodeOf(modality), modality };
  // said in the message only (LiveKit's LLM keeps no more of it): the answer came, and was too big
  const overBound = overBoundMessage(inner);
  if (overBound) return { ...base, kind: 'failed', message: `the ${modality} model failed: ${overBound}` };
  if (inner.name === 'APITimeoutError')
    return { ...base, kind: 'timeout', message: `the ${modality} model did not answer in time` };
  if (status === undefined)
    // the OpenAI client's connection errors reach LiveKit as an APIStatusError without a status (-1)
    return CONNECTION_ERRORS.has(inner.name ?? '')
      ? { ...base, kind: 'unreachable', message: `the ${modality} model could not be reached` }
      : { ...base, kind: 'failed', message: redact(withoutUrlSecrets(String(inner.message ?? 'failed'))) };
  const kind = status === 401 || status === 403 ? 'auth' : status === 429 ? 'rate_limited' : 'http_error';
  const said = redact(withoutUrlSecrets(String(inner.message ?? '')));
  return {
    ...base,
    kind,
    status,
    message: `the ${modality} model answered ${status}${said ? `: ${said}` : ''}`,
  };
}
