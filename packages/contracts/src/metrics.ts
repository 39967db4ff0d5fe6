import { z } from 'zod';
import { EpochMs, Id } from './common.js';

// ---- figures and usage -------------------------------------------------------------------------

const Ms = z.number().nonnegative();

/**
 * What one agent turn took, in milliseconds. Voice turns carry LiveKit's own figures (its end-to-end latency
 * is stored as LiveKit computes it, never summed from the parts); text turns carry the model's and ours.
 * Each figure is present only when it was measured.
 */
export const TurnMetrics = z.object({
  /** Voice: from the user's end of speech to the agent's first audio (LiveKit's `e2eLatency`). */
  e2eLatencyMs: Ms.optional(),
  /**
   * Voice: what a caller feels — from the end of the user's speech in the input audio (the VAD's) to the first
   * non-silent agent audio sent back to the client.
   */
  responseMs: Ms.optional(),
  /** Voice: end-of-utterance detection delay (LiveKit's `endOfTurnDelay`). */
  endOfTurnDelayMs: Ms.optional(),
  /** Voice: from the end of speech to the final transcript (LiveKit's `transcriptionDelay`). */
  transcriptionDelayMs: Ms.optional(),
  /** The first model call of the turn: time to its first token. */
  llmTtftMs: Ms.optional(),
  /** Text: every model call of the turn, summed. */
  llmDurationMs: Ms.optional(),
  /** Voice: time to the first byte of synthesized audio (LiveKit's `ttsNodeTtfb`). */
  ttsTtfbMs: Ms.optional(),
  /** Text: time spent in tool calls (MCP) during the turn, summed. */
  toolMs: Ms.optional(),
  /** Text: the whole turn, from the user's text to the agent's last reply. */
  turnMs: Ms.optional(),
});
export type TurnMetrics = z.infer<typeof TurnMetrics>;

/** The figures a turn can carry, in a fixed order (stats, the console and docs list them so). */
export const METRIC_NAMES = [
  'e2eLatencyMs',
  'responseMs',
  'endOfTurnDelayMs',
  'transcriptionDelayMs',
  'llmTtftMs',
  'llmDurationMs',
  'ttsTtfbMs',
  'toolMs',
  'turnMs',
] as const satisfies readonly (keyof TurnMetrics)[];
export type MetricName = (typeof METRIC_NAMES)[number];

/**
 * Whether a turn called a model: a literal line (a greeting said word for word, a goodbye) calls none, and its
 * figures (a 1 ms `turnMs`) are not a latency of the agent's — stats, a run's latency and the console's chart
 * leave such turns out, so they do not pull the medians down.
 */
export const calledModel = (m: TurnMetrics): boolean =>
  m.llmTtftMs !== undefined || m.llmDurationMs !== undefined || m.e2eLatencyMs !== undefined;

/** What one model of one provider used during a session (LiveKit's usage collector, per provider and model). */
export const ModelUsage = z.object({
  kind: z.enum(['llm', 'tts', 'stt']),
  provider: z.string().max(100),
  model: z.string().max(200),
  promptTokens: z.number().int().nonnegative().optional(),
  completionTokens: z.number().int().nonnegative().optional(),
  cachedTokens: z.number().int().nonnegative().optional(),
  ttsCharacters: z.number().int().nonnegative().optional(),
  sttAudioSeconds: z.number().nonnegative().optional(),
});
export type ModelUsage = z.infer<typeof ModelUsage>;

/** The amounts of a `ModelUsage`, the fields that add up across calls and sessions. */
export const USAGE_FIELDS = [
  'promptTokens',
  'completionTokens',
  'cachedTokens',
  'ttsCharacters',
  'sttAudioSeconds',
] as const satisfies readonly (keyof ModelUsage)[];

export const SessionUsage = z.array(ModelUsage).max(100);
export type SessionUsage = z.infer<typeof SessionUsage>;

// ---- stats -------------------------------------------------------------------------------------

/** Percentiles of one figure over the turns that measured it (ms), from a mergeable histogram. */
export const FigureStats = z.object({
  count: z.number().int().nonnegative(),
  p50: z.number().nonnegative(),
  p90: z.number().nonnegative(),
  p99: z.number().nonnegative(),
  mean: z.number().nonnegative(),
  max: z.number().nonnegative(),
});
export type FigureStats = z.infer<typeof FigureStats>;

export const UsageTotals = z.object({
  kind: ModelUsage.shape.kind,
  provider: z.string(),
  model: z.string(),
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  cachedTokens: z.number().int().nonnegative(),
  ttsCharacters: z.number().int().nonnegative(),
  sttAudioSeconds: z.number().nonnegative(),
});
export type UsageTotals = z.infer<typeof UsageTotals>;

export const AgentStats = z.object({
  agentId: Id,
  /** The version these figures are of; null: every version (and drafts) since `since`. */
  version: z.number().int().positive().nullable(),
  /** The start of the first UTC day counted (agent-wide stats); null for a version's. */
  since: EpochMs.nullable(),
  sessions: z.number().int().nonnegative(),
  turns: z.number().int().nonnegative(),
  /** Turns that failed (a model of the flow could not answer): counted here, not in `turns`' figures. */
  failedTurns: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  /** Only the figures some turn measured. */
  figures: z.partialRecord(z.enum(METRIC_NAMES), FigureStats),
  usage: z.array(UsageTotals),
});
export type AgentStats = z.infer<typeof AgentStats>;

export const VersionStatsParams = z.object({ id: Id, version: z.coerce.number().int().positive() });
export type VersionStatsParams = z.infer<typeof VersionStatsParams>;

export const AgentStatsQuery = z.object({
  /** Epoch ms or an ISO date: counted from the start of its UTC day (at most the retention period back). */
  since: z.string().optional(),
});
export type AgentStatsQuery = z.infer<typeof AgentStatsQuery>;

/** How a figure changed between two sets of stats (a test run against the last passing run, a version diff). */
export const LatencyChange = z.object({
  figure: z.enum(METRIC_NAMES),
  /** p50 before → after, ms. */
  before: z.number().nonnegative(),
  after: z.number().nonnegative(),
  /** after − before, ms (negative: faster). */
  delta: z.number(),
});
export type LatencyChange = z.infer<typeof LatencyChange>;

export type FigureP50s = Partial<Record<MetricName, number>>;

/** The figures both sides measured, before → after (the one comparison test runs and version diffs show). */
export function latencyChanges(before: FigureP50s, after: FigureP50s): LatencyChange[] {
  const changes: LatencyChange[] = [];
  for (const figure of METRIC_NAMES) {
    const a = before[figure];
    const b = after[figure];
    if (a === undefined || b === undefined) continue;
    changes.push({ figure, before: a, after: b, delta: Math.round((b - a) * 100) / 100 });
  }
  return changes;
}
